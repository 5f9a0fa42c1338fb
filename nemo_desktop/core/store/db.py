"""The results store: SQLite (WAL) rows pointing at content-addressed artifact files.

Write order makes crashes harmless: artifact files are written atomically first (temp file, fsync,
rename), then the row and its artifact references are committed in one transaction. A crash before the
commit leaves at most an unreferenced file (reported by `check()` as an orphan, removed by `cleanup()`),
never a row whose files are missing or half-written.

Deleting files is done while holding the database write lock (inside the transaction that removes the
last reference), and `put` re-checks its files inside its own transaction, so a concurrent delete or
cleanup in another process can never leave a committed row without its file.

One connection per store object, shared by threads under a lock; several processes may open the same
database at once (WAL, busy_timeout, BEGIN IMMEDIATE for every write).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Iterator, Mapping

from ..errors import StoreError
from .atomic import TMP_SUFFIX, atomic_write_bytes, atomic_writer, corrupt_aside_name, temp_writer_alive
from .disk_space import disk_full_error, is_disk_full
from .keys import content_hash
from .migrations import CURRENT_VERSION, migrate, user_version
from .paths import AppPaths, get_paths
from .sqlite_codes import primary_code

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes)
_SQLITE_BUSY = 5  # sqlite3.SQLITE_BUSY exists from Python 3.11 only
_ENVIRONMENT_CODES = {5: "busy", 6: "locked", 8: "read-only", 10: "I/O error", 13: "full", 14: "cannot open"}
_FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARRAY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_SQLITE_MAGIC = b"SQLite format 3\x00"

# Prefixes of the strings check() returns; callers may group problems by them.
PROBLEM_DATABASE = "database"
PROBLEM_MISSING = "missing artifact"
PROBLEM_CORRUPT = "corrupt artifact"
PROBLEM_TMP = "leftover temp file"
PROBLEM_ORPHAN = "orphan artifact"
PROBLEM_KEPT = "kept for salvage"
CHECK_STAGE = "Checking artifact files"  # check()'s progress stage


def _is_corruption(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = primary_code(exc)
    if code is not None:
        return code in _CORRUPT_CODES
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


def _translate(exc: sqlite3.Error, db_path: Path) -> StoreError | None:
    """Environment failures (busy, disk full, corrupt, ...) become StoreError; programming errors stay as-is."""
    if _is_corruption(exc):
        return StoreError(f"The results database {db_path} is damaged ({exc}).",
                          hint="Run `nemo cache check`. Moving the file aside (NEMO Desktop then starts a fresh "
                               "store) keeps the old data for inspection.", detail=repr(exc))
    what = _ENVIRONMENT_CODES.get(primary_code(exc) or -1)
    if what is None:
        return None
    if is_disk_full(exc, db_path):  # "database or disk is full", or "disk I/O error" on a disk with no space left
        return disk_full_error(db_path, exc)
    hints = {
        "busy": "Another NEMO Desktop process kept the database locked for more than 30 s; wait for it to "
                "finish or close it, then try again.",
        "locked": "Another NEMO Desktop process kept the database locked; try again.",
        "read-only": "Check the permissions of the store folder, or choose another one with NEMO_HOME.",
        "I/O error": "Check the disk holding the store (free space, permissions, errors in the system log).",
        "full": "Free some disk space (e.g. `nemo cache clear`), or move the store with NEMO_HOME.",
        "cannot open": "Check that the folder exists and is writable, or choose another one with NEMO_HOME.",
    }
    return StoreError(f"The results database {db_path} could not be used ({what}: {exc}).", hint=hints[what],
                      detail=repr(exc))


@dataclass
class StoredResult:
    key: str
    kind: str
    payload: dict
    created_at: float
    artifacts: dict[str, Path] = field(default_factory=dict)

    def _path(self, name: str) -> Path:
        try:
            return self.artifacts[name]
        except KeyError:
            raise KeyError(f"result {self.key[:12]} has no artifact {name!r} "
                           f"(it has: {', '.join(sorted(self.artifacts)) or 'none'})") from None

    def artifact_bytes(self, name: str) -> bytes:
        return self._path(name).read_bytes()

    def load_image(self, name: str):
        from PIL import Image

        with Image.open(self._path(name)) as im:
            im.load()  # read now: the file is closed on leaving the block
        return im

    def load_array(self, name: str):
        import numpy as np

        return np.load(self._path(name), allow_pickle=False)


def _encode_artifact(name: str, value: Any) -> tuple[str, bytes]:
    """(extension, file bytes): PNG for PIL images, .npy for numpy arrays, .bin for bytes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bin", bytes(value)
    module = type(value).__module__
    if module.startswith("PIL."):
        buf = io.BytesIO()
        value.save(buf, format="PNG")
        return "png", buf.getvalue()
    if module == "numpy" and type(value).__name__ == "ndarray":
        import numpy as np

        buf = io.BytesIO()
        np.save(buf, value, allow_pickle=False)
        return "npy", buf.getvalue()
    raise TypeError(f"artifact {name!r}: expected bytes, a PIL image or a numpy array, not {type(value).__name__}")


def _json_default(value: Any) -> Any:
    if isinstance(value, PurePath):
        return value.as_posix()
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return value.item()  # numpy scalars (probabilities, indices)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _dump_json(obj: Any, what: str) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default)
    except ValueError as exc:  # NaN / infinity: SQLite's JSON functions would reject the row later
        raise ValueError(f"{what} contains NaN or infinity, which cannot be stored as JSON; use None") from exc



def enable_wal(conn: sqlite3.Connection, timeout_s: float = BUSY_TIMEOUT_MS / 1000) -> str:
    """Switch to WAL and return the journal mode now in force.

    Two processes opening a fresh database at once: SQLite answers the loser's switch with "database is
    locked" at once, without its busy handler (measured: 4 of 25 rounds of six processes failed). Retry
    until the usual busy timeout; by then the winner has switched the file to WAL for everybody.
    """
    deadline, delay = time.monotonic() + timeout_s, 0.002
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            busy = primary_code(exc) == _SQLITE_BUSY or "locked" in str(exc)
            if not busy or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, 0.1)

class ResultsStore:
    """See STORE_API.md. Open with `ResultsStore.open(...)`; usable as a context manager."""

    def __init__(self, conn: sqlite3.Connection, db_path: Path, artifacts_dir: Path,
                 recovered_from: Path | None = None, opened_empty: bool = False):
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.RLock()
        self._savepoints = 0
        self.db_path = db_path
        self.artifacts_dir = artifacts_dir
        self.store_dir = db_path.parent
        self.arrays_dir = self.store_dir / "arrays"
        self.recovered_from = recovered_from
        self.opened_empty = opened_empty  # the database file existed with 0 bytes (truncated, or never written)

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, paths: AppPaths | None = None, *, db_path: str | os.PathLike | None = None,
             artifacts_dir: str | os.PathLike | None = None, recover_corrupt: bool = True) -> "ResultsStore":
        if db_path is None:
            paths = (paths or get_paths()).ensure()
            db = paths.database
            art = Path(artifacts_dir) if artifacts_dir else paths.artifacts_dir
        else:
            db = Path(db_path)
            art = Path(artifacts_dir) if artifacts_dir else db.parent / "artifacts"
        for d in (db.parent, art):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"NEMO Desktop cannot create the store folder {d}.",
                                 hint="Check the folder's permissions and free space, or choose another location "
                                      "with the NEMO_HOME environment variable.", detail=repr(exc)) from exc
        recovered_from = None
        opened_empty = cls._is_empty_file(db)
        if opened_empty:
            log.warning("The results database %s was an empty file (0 bytes): it holds no results, and a fresh "
                        "store was created in it. If it held results before, it was truncated (a full disk or a "
                        "copy that did not finish).", db)
        try:
            cls._check_header(db)  # before SQLite touches it: SQLite would delete a WAL next to a non-database
            conn = cls._connect(db)
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise cls._open_error(exc, db) from exc
            if not recover_corrupt:
                raise StoreError(f"The results database {db} is not a readable SQLite database ({exc}).",
                                 hint="Move the file aside (or delete it) to start a fresh store, or open the "
                                      "store with recovery enabled, which moves it aside automatically.",
                                 detail=repr(exc)) from exc
            recovered_from = cls._move_aside(db)
            log.warning("The results database %s could not be read (%s); it was moved to %s and a fresh store "
                        "was created. The artifact files of the old results are kept: `nemo cache salvage %s` "
                        "recovers what is still readable, `nemo cache discard %s` gives it up.", db, exc,
                        recovered_from, recovered_from, recovered_from)
            try:
                conn = cls._connect(db)
            except sqlite3.Error as exc2:
                raise cls._open_error(exc2, db) from exc2
        return cls(conn, db, art, recovered_from, opened_empty)

    @staticmethod
    def _is_empty_file(db: Path) -> bool:
        try:
            return db.stat().st_size == 0
        except OSError:
            return False

    @staticmethod
    def _check_header(db: Path) -> None:
        try:
            with open(db, "rb") as f:
                head = f.read(len(_SQLITE_MAGIC))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"The results database {db} cannot be read.",
                             hint="Check the file's permissions, or choose another location with NEMO_HOME.",
                             detail=repr(exc)) from exc
        if head and head != _SQLITE_MAGIC:  # an empty file is a valid, empty database
            err = sqlite3.DatabaseError("file is not a database (no SQLite header)")
            err.sqlite_errorcode = 26  # SQLITE_NOTADB, as SQLite itself would report
            raise err

    @staticmethod
    def _connect(db: Path) -> sqlite3.Connection:
        """Open, configure, verify readability and migrate; raises sqlite3.DatabaseError if corrupt."""
        conn = sqlite3.connect(str(db), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the header: NOTADB shows here
            mode = enable_wal(conn)
            if str(mode).lower() != "wal":
                log.warning("SQLite could not switch %s to WAL mode (got %s); concurrent use will be slower.",
                            db, mode)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            try:
                migrate(conn, db)
            except (StoreError, sqlite3.DatabaseError):
                raise
            except Exception as exc:
                raise StoreError(f"The results database {db} could not be upgraded to schema version "
                                 f"{CURRENT_VERSION}.", hint="Report this as a bug; meanwhile point NEMO_HOME at "
                                 "another folder to start a fresh store.", detail=repr(exc)) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _open_error(exc: sqlite3.Error, db: Path) -> StoreError:
        return _translate(exc, db) or StoreError(
            f"The results database {db} could not be opened ({exc}).",
            hint="Check the folder's permissions, or choose another location with NEMO_HOME.", detail=repr(exc))

    @staticmethod
    def _move_aside(db: Path) -> Path:
        target = corrupt_aside_name(db)
        try:
            os.replace(db, target)
        except FileNotFoundError:  # another process moved it first
            pass
        except OSError as exc:
            raise StoreError(f"The results database {db} is damaged and could not be moved aside.",
                             hint="Move or rename it yourself, then start again.", detail=repr(exc)) from exc
        # A stale WAL from the damaged file must not be replayed into the fresh database.
        for suffix in ("-wal", "-shm"):
            side = db.with_name(db.name + suffix)
            if side.exists():
                with contextlib.suppress(OSError):
                    os.replace(side, target.with_name(target.name + suffix))
        return target

    # ---------------------------------------------------------------- low level

    def _require_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("The results store is closed.", hint="Open it again with ResultsStore.open().")
        return self._conn

    @contextlib.contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            translated = _translate(exc, self.db_path)
            if translated is None:
                raise
            raise translated from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE): commit on success, roll back on any exception; nests."""
        with self._lock, self._sqlite_errors():
            conn = self._require_conn()
            if conn.in_transaction:
                self._savepoints += 1
                name = f"nemo_sp{self._savepoints}"
                conn.execute(f"SAVEPOINT {name}")
                try:
                    yield conn
                except BaseException:
                    conn.execute(f"ROLLBACK TO {name}")
                    conn.execute(f"RELEASE {name}")
                    raise
                else:
                    conn.execute(f"RELEASE {name}")
                finally:
                    self._savepoints -= 1
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._sqlite_errors():
            yield self._require_conn()

    def _artifact_path(self, sha: str, ext: str) -> Path:
        return self.artifacts_dir / sha[:2] / f"{sha}.{ext}"

    def _write_artifact(self, path: Path, data: bytes, *, force: bool = False, outside_lock: bool = False) -> None:
        # Content-addressed: an existing file of the right size already holds these bytes (check() verifies).
        if not force:
            try:
                if path.stat().st_size == len(data):
                    return
            except FileNotFoundError:
                pass
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        except FileNotFoundError:
            if outside_lock:  # a concurrent cleanup removed our temp file; put() rewrites under the lock
                return
            raise StoreError(f"Could not write the artifact file {path}: its folder disappeared.",
                             hint="Do not remove the store folder while NEMO Desktop is running.") from None
        except OSError as exc:
            if is_disk_full(exc, path):
                raise disk_full_error(path, exc, self.store_dir) from exc
            raise StoreError(f"Could not write the artifact file {path}.",
                             hint="Check free disk space and the store folder's permissions.",
                             detail=repr(exc)) from exc

    def _unlink_if_unreferenced(self, conn: sqlite3.Connection, files: set[tuple[str, str]]) -> None:
        """Delete artifact files no row references any more; call inside the write transaction."""
        for sha, ext in files:
            if conn.execute("SELECT 1 FROM result_artifacts WHERE sha256 = ? AND ext = ? LIMIT 1",
                            (sha, ext)).fetchone() is None:
                with contextlib.suppress(FileNotFoundError):
                    self._artifact_path(sha, ext).unlink()

    # ---------------------------------------------------------------- results

    _SELECT = ("SELECT r.key, r.kind, r.payload, r.created_at, "
               "(SELECT json_group_array(json_array(a.name, a.sha256, a.ext)) FROM result_artifacts a "
               " WHERE a.result_key = r.key) FROM results r")

    def _row_to_result(self, row: tuple) -> StoredResult:
        key, kind, payload, created_at, refs = row
        artifacts = {name: self._artifact_path(sha, ext) for name, sha, ext in json.loads(refs or "[]")}
        return StoredResult(key=key, kind=kind, payload=json.loads(payload), created_at=created_at,
                            artifacts=artifacts)

    def get(self, key: str) -> StoredResult | None:
        with self._reading() as conn:  # one statement: a consistent snapshot of the row and its refs
            row = conn.execute(self._SELECT + " WHERE r.key = ?", (key,)).fetchone()
        return None if row is None else self._row_to_result(row)

    def has(self, key: str) -> bool:
        with self._reading() as conn:
            return conn.execute("SELECT 1 FROM results WHERE key = ?", (key,)).fetchone() is not None

    def put(self, key: str, kind: str, payload: dict,
            artifacts: Mapping[str, Any] | None = None) -> StoredResult:
        if not isinstance(key, str) or not key:
            raise ValueError("put: key must be a non-empty string (see result_key())")
        if not isinstance(kind, str) or not kind:
            raise ValueError("put: kind must be a non-empty string")
        if not isinstance(payload, dict):
            raise TypeError(f"put: payload must be a dict, not {type(payload).__name__}")
        payload_text = _dump_json(payload, "payload")
        encoded: list[tuple[str, str, str, bytes]] = []  # name, sha, ext, data
        for name, value in (artifacts or {}).items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"put: artifact names must be non-empty strings, got {name!r}")
            ext, data = _encode_artifact(name, value)
            encoded.append((name, hashlib.sha256(data).hexdigest(), ext, data))
        # The slow part (fsync per new file) happens before taking the database write lock. A cleanup in
        # another process may remove a file (or temp file) here; the check inside the transaction repairs it.
        for _, sha, ext, data in encoded:
            self._write_artifact(self._artifact_path(sha, ext), data, outside_lock=True)
        now = time.time()
        with self.transaction() as conn:
            for _, sha, ext, data in encoded:  # a concurrent delete/cleanup may have removed a shared file
                path = self._artifact_path(sha, ext)
                if not path.exists():
                    self._write_artifact(path, data, force=True)
            old = set(conn.execute("SELECT sha256, ext FROM result_artifacts WHERE result_key = ?", (key,)))
            conn.execute("INSERT INTO results(key, kind, payload, created_at) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT(key) DO UPDATE SET kind = excluded.kind, payload = excluded.payload, "
                         "created_at = excluded.created_at", (key, kind, payload_text, now))
            conn.execute("DELETE FROM result_artifacts WHERE result_key = ?", (key,))
            conn.executemany("INSERT INTO result_artifacts(result_key, name, sha256, ext, size) "
                             "VALUES (?, ?, ?, ?, ?)",
                             [(key, name, sha, ext, len(data)) for name, sha, ext, data in encoded])
            self._unlink_if_unreferenced(conn, old - {(sha, ext) for _, sha, ext, _ in encoded})
        return StoredResult(key=key, kind=kind, payload=json.loads(payload_text), created_at=now,
                            artifacts={name: self._artifact_path(sha, ext) for name, sha, ext, _ in encoded})

    def delete(self, key: str) -> None:
        with self.transaction() as conn:
            files = set(conn.execute("SELECT sha256, ext FROM result_artifacts WHERE result_key = ?", (key,)))
            conn.execute("DELETE FROM results WHERE key = ?", (key,))
            self._unlink_if_unreferenced(conn, files)

    def find(self, kind: str | None = None, limit: int | None = None, **payload_equals: Any) -> list[StoredResult]:
        where, params = [], []
        if kind is not None:
            where.append("r.kind = ?")
            params.append(kind)
        for fieldname, value in payload_equals.items():
            if not _FIELD_RE.match(fieldname):
                raise ValueError(f"find: {fieldname!r} is not a valid payload field name")
            path = f"$.{fieldname}"
            if value is None or isinstance(value, bool):
                where.append("json_type(r.payload, ?) = ?")
                params += [path, "null" if value is None else ("true" if value else "false")]
            elif isinstance(value, (str, int, float)):
                where.append("json_extract(r.payload, ?) = ?")
                params += [path, value]
            else:
                raise TypeError(f"find: {fieldname}= must be a str, number, bool or None")
        sql = self._SELECT + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY r.created_at DESC, r.rowid DESC LIMIT ?"
        params.append(-1 if limit is None else int(limit))
        with self._reading() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [self._row_to_result(r) for r in rows]

    def clear(self, kind: str | None = None) -> int:
        """Delete results (of one kind, or all) and their now-unreferenced artifacts; returns rows deleted.

        Clearing everything also removes leftovers of interrupted writes (see cleanup())."""
        cond, params = ("WHERE r.kind = ?", (kind,)) if kind is not None else ("", ())
        with self.transaction() as conn:
            files = set(conn.execute("SELECT DISTINCT a.sha256, a.ext FROM result_artifacts a JOIN results r "
                                     f"ON r.key = a.result_key {cond}", params))
            n = conn.execute(f"DELETE FROM results {cond.replace('r.', '')}", params).rowcount
            self._unlink_if_unreferenced(conn, files)
        if kind is None:
            self.cleanup()
        return n

    # ---------------------------------------------------------------- runs

    def create_run(self, kind: str, config: dict, run_id: str | None = None) -> str:
        run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        try:
            with self.transaction() as conn:
                conn.execute("INSERT INTO runs(run_id, kind, config, created_at, status) VALUES (?, ?, ?, ?, ?)",
                             (run_id, kind, _dump_json(config, "run config"), time.time(), "created"))
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"A run with id {run_id!r} already exists.",
                             hint="Resume that run, or choose another id.", detail=repr(exc)) from exc
        return run_id

    @staticmethod
    def _run_dict(row: tuple) -> dict:
        run_id, kind, config, created_at, status = row
        return {"run_id": run_id, "kind": kind, "config": json.loads(config), "created_at": created_at,
                "status": status}

    def get_run(self, run_id: str) -> dict | None:
        with self._reading() as conn:
            row = conn.execute("SELECT run_id, kind, config, created_at, status FROM runs WHERE run_id = ?",
                               (run_id,)).fetchone()
        return None if row is None else self._run_dict(row)

    def list_runs(self, kind: str | None = None) -> list[dict]:
        sql = "SELECT run_id, kind, config, created_at, status FROM runs"
        params: tuple = ()
        if kind is not None:
            sql, params = sql + " WHERE kind = ?", (kind,)
        with self._reading() as conn:
            rows = conn.execute(sql + " ORDER BY created_at DESC, rowid DESC", params).fetchall()
        return [self._run_dict(r) for r in rows]

    def set_run_status(self, run_id: str, status: str) -> None:
        with self.transaction() as conn:
            if conn.execute("UPDATE runs SET status = ? WHERE run_id = ?", (status, run_id)).rowcount == 0:
                raise StoreError(f"There is no run {run_id!r} in the results store.",
                                 hint="List the runs with `nemo cache info`.")

    def delete_run(self, run_id: str) -> None:
        """Forget a run and its items (the results it produced stay)."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    def add_run_item(self, run_id: str, item_id: str, result_key: str | None, status: str,
                     error: dict | None = None) -> None:
        error_text = None if error is None else _dump_json(error, "run item error")
        try:
            with self.transaction() as conn:
                conn.execute(
                    "INSERT INTO run_items(run_id, item_id, result_key, status, error, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(run_id, item_id) DO UPDATE SET "
                    "result_key = excluded.result_key, status = excluded.status, error = excluded.error, "
                    "updated_at = excluded.updated_at",
                    (run_id, item_id, result_key, status, error_text, time.time()))
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"There is no run {run_id!r} to add item {item_id!r} to.",
                             hint="Create the run first with create_run().", detail=repr(exc)) from exc

    def run_items(self, run_id: str) -> list[dict]:
        with self._reading() as conn:
            rows = conn.execute("SELECT item_id, result_key, status, error, updated_at FROM run_items "
                                "WHERE run_id = ? ORDER BY rowid", (run_id,)).fetchall()
        return [{"item_id": i, "result_key": k, "status": s, "error": None if e is None else json.loads(e),
                 "updated_at": u} for i, k, s, e, u in rows]

    # ---------------------------------------------------------------- large arrays

    def array_path(self, name: str) -> Path:
        if not _ARRAY_NAME_RE.match(name) or name.endswith(TMP_SUFFIX):
            raise ValueError(f"array name {name!r}: use letters, digits, '.', '_' and '-' only")
        return self.arrays_dir / f"{name}.npy"

    def save_array(self, name: str, arr: Any) -> Path:
        import numpy as np

        path = self.array_path(name)
        try:
            self.arrays_dir.mkdir(parents=True, exist_ok=True)
            with atomic_writer(path) as f:  # streamed: no second in-memory copy of a large matrix
                np.save(f, np.asarray(arr), allow_pickle=False)
        except OSError as exc:
            if is_disk_full(exc, path):
                raise disk_full_error(path, exc, self.store_dir) from exc
            raise StoreError(f"Could not write the array file {path}.",
                             hint="Check free disk space and the store folder's permissions.",
                             detail=repr(exc)) from exc
        return path

    def open_array(self, name: str, mmap: bool = True):
        import numpy as np

        path = self.array_path(name)
        if not path.exists():
            raise StoreError(f"The stored array {name!r} is missing ({path}).",
                             hint="Rebuild what produced it (for example the reference index).")
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)

    # ---------------------------------------------------------------- maintenance

    def schema_version(self) -> int:
        with self._reading() as conn:
            return user_version(conn)

    def info(self) -> dict:
        with self._reading() as conn:
            per_kind = dict(conn.execute("SELECT kind, count(*) FROM results GROUP BY kind ORDER BY kind"))
            files, nbytes = conn.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM "
                "(SELECT sha256, ext, max(size) AS size FROM result_artifacts GROUP BY sha256, ext)").fetchone()
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
            version = user_version(conn)
        db_bytes = sum(p.stat().st_size for p in (self.db_path, self.db_path.with_name(self.db_path.name + "-wal"))
                       if p.exists())
        arrays = list(self.arrays_dir.glob("*.npy")) if self.arrays_dir.is_dir() else []
        return {"database": str(self.db_path), "artifacts_dir": str(self.artifacts_dir),
                "arrays_dir": str(self.arrays_dir), "schema_version": version, "journal_mode": journal,
                "database_bytes": db_bytes, "results": sum(per_kind.values()), "rows_per_kind": per_kind,
                "artifact_files": files, "artifact_bytes": nbytes, "arrays": len(arrays),
                "array_bytes": sum(p.stat().st_size for p in arrays), "runs": runs,
                "recovered_from": str(self.recovered_from) if self.recovered_from else None}

    def _walk_files(self) -> Iterator[Path]:
        for root in (self.artifacts_dir, self.arrays_dir):
            if root.is_dir():
                yield from (p for p in root.rglob("*") if p.is_file())

    def check(self, ctx: Any = None) -> list[str]:
        """Problems found, each '<category>: <what>' (see the PROBLEM_* prefixes); empty when all is well.
        `ctx` (a JobContext) gets the progress of hashing the artifact files, the slow part, and can cancel it."""
        problems: list[str] = []
        on_disk = list(self._walk_files())  # listed before the snapshot: files of later puts are not orphans
        try:
            with self._lock:
                conn = self._require_conn()
                conn.execute("BEGIN")  # one snapshot for all three reads
                try:
                    integrity = [r[0] for r in conn.execute("PRAGMA integrity_check")]
                    fk = conn.execute("PRAGMA foreign_key_check").fetchall()
                    refs = conn.execute("SELECT sha256, ext, result_key, name FROM result_artifacts").fetchall()
                finally:
                    conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise
            return [f"{PROBLEM_DATABASE}: {self.db_path} is damaged ({exc}); move it aside to start a fresh store"]
        if integrity != ["ok"]:
            problems += [f"{PROBLEM_DATABASE}: {line}" for line in integrity]
        problems += [f"{PROBLEM_DATABASE}: row {rowid} of {table} points at a missing {parent} row"
                     for table, rowid, parent, _ in fk]
        users: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for sha, ext, key, name in refs:
            users.setdefault((sha, ext), []).append((key, name))
        for i, ((sha, ext), used_by) in enumerate(sorted(users.items())):
            if ctx is not None:
                ctx.check_cancelled()
                ctx.progress(CHECK_STAGE, i, len(users))
            path = self._artifact_path(sha, ext)
            who = ", ".join(f"result {k[:12]} '{n}'" for k, n in used_by[:3]) + (
                f" and {len(used_by) - 3} more" if len(used_by) > 3 else "")
            if not path.is_file():
                problems.append(f"{PROBLEM_MISSING}: {path} (used by {who}) does not exist")
            elif content_hash(path) != sha:
                problems.append(f"{PROBLEM_CORRUPT}: {path} (used by {who}) does not match its sha256")
        if ctx is not None:
            ctx.progress(CHECK_STAGE, len(users), len(users))
        referenced = {self._artifact_path(sha, ext) for sha, ext in users}
        asides = self.aside_databases()
        kept = 0
        for p in on_disk:
            if p.name.endswith(TMP_SUFFIX):
                problems.append(f"{PROBLEM_TMP}: {p} (left by an interrupted write; safe to remove)")
            elif p.parent.parent == self.artifacts_dir and p not in referenced:
                if asides:
                    kept += 1
                else:
                    problems.append(f"{PROBLEM_ORPHAN}: {p} is not used by any result (left by an interrupted "
                                    f"write; safe to remove)")
        for aside in asides if kept else ():
            problems.append(f"{PROBLEM_KEPT}: {aside} is a damaged database moved aside; {kept} artifact file(s) "
                            f"not used by the current database are kept because they may belong to it. "
                            f"`nemo cache salvage {aside}` recovers its readable results; `nemo cache discard "
                            f"{aside}` gives it up, after which `nemo cache check --repair` removes those files")
        return problems

    def aside_databases(self) -> list[Path]:
        """Damaged databases moved aside next to this one and not yet discarded (see salvage.py)."""
        from .salvage import aside_databases

        return aside_databases(self.db_path)

    def cleanup(self, stale_after_s: float = 86_400.0) -> dict[str, int]:
        """Remove leftovers of interrupted writes: temp files and artifact files no result uses. While a damaged
        database moved aside is not discarded, unused artifact files are kept: they may be its results' files,
        which `nemo cache salvage` can bring back (check() reports how many).

        A temp file is removed when the process that wrote it is gone (its pid is in the name) or it is
        older than `stale_after_s` (a writer on another machine sharing the folder). Runs under the write
        lock (the directory walk does not), so no row can start using a file while it is removed; put()
        re-creates a file it lost."""
        removed = {"tmp": 0, "orphans": 0}
        files = list(self._walk_files())  # the slow walk happens outside the write lock
        tmp_files = {p for p in files if p.name.endswith(TMP_SUFFIX)}
        removed["tmp"] = sum(self._remove_stale_tmp(p, stale_after_s) for p in tmp_files)
        artifact_files = [p for p in files if p not in tmp_files and p.parent.parent == self.artifacts_dir]
        if not artifact_files or self.aside_databases():  # unused files may be a moved-aside database's: kept
            return removed
        with self.transaction() as conn:
            referenced = {self._artifact_path(sha, ext)
                          for sha, ext in conn.execute("SELECT DISTINCT sha256, ext FROM result_artifacts")}
            for p in artifact_files:
                if p not in referenced:
                    with contextlib.suppress(FileNotFoundError):
                        p.unlink()
                        removed["orphans"] += 1
        return removed

    def cleanup_tmp(self, stale_after_s: float = 86_400.0) -> int:
        """Remove only leftover temp files (see cleanup()); returns how many."""
        return sum(self._remove_stale_tmp(p, stale_after_s) for p in list(self._walk_files())
                   if p.name.endswith(TMP_SUFFIX))

    @staticmethod
    def _remove_stale_tmp(p: Path, stale_after_s: float) -> bool:
        try:
            if temp_writer_alive(p) and time.time() - p.stat().st_mtime < stale_after_s:
                return False
            p.unlink()
            return True
        except FileNotFoundError:
            return False

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA optimize")
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.db_path)!r})"
