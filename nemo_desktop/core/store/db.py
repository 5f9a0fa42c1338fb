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
import json
import logging
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..base.errors import StoreError
from .arrays import ArraysMixin
from .atomic import TMP_SUFFIX, atomic_write_bytes, corrupt_aside_name
from .disk_space import write_error
from .maintenance import MaintenanceMixin
from .migrations import CURRENT_VERSION, migrate
from .paths import AppPaths, get_paths
from .runs import RunsMixin
from .serialize import _dump_json, _encode_artifact
from .sqlite_errors import BUSY_TIMEOUT_MS, _is_corruption, _translate, enable_wal

log = logging.getLogger(__name__)

_OPEN_LOCK_TIMEOUT_S = 120.0


@contextlib.contextmanager
def _open_lock(db: Path) -> Iterator[None]:
    """An inter-process lock (`<db>.open-lock`) held while a store is opened. Where the file system offers no
    locks, opening goes on without one (as before the lock existed)."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(db) + ".open-lock", timeout=_OPEN_LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout as exc:
        raise StoreError(f"Another process has been opening the results database {db} for "
                         f"{_OPEN_LOCK_TIMEOUT_S:.0f} s.",
                         hint="Close other NEMO Desktop windows or commands using this store (a long schema "
                              "upgrade may be running), then try again.", detail=repr(exc)) from exc
    except (OSError, NotImplementedError) as exc:
        log.warning("Could not take the open lock of %s (%r); opening without it.", db, exc)
        yield
        return
    try:
        yield
    finally:
        lock.release()


_FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SQLITE_MAGIC = b"SQLite format 3\x00"


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


class ResultsStore(RunsMixin, ArraysMixin, MaintenanceMixin):
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
        # the database file existed with 0 bytes and nothing beside it (never written); with stored files beside
        # it, a 0-byte file is a truncated database and is moved aside instead (recovered_from)
        self.opened_empty = opened_empty
        self.read_only: str | None = None  # open_read_only(): "read-only" (mode=ro) or "immutable"

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
        # One process at a time decides what the file is and creates or migrates it: a database another
        # process is creating is never seen as an empty file with artifacts beside it (and moved aside).
        with _open_lock(db):
            recovered_from, opened_empty = None, False
            if cls._is_empty_file(db):
                beside = cls._files_beside(db, art)
                if not beside:
                    opened_empty = True
                    log.warning("The results database %s was an empty file (0 bytes) with no artifact files "
                                "beside it: a fresh store was created in it.", db)
                elif not recover_corrupt:
                    raise StoreError(f"The results database {db} is an empty file (0 bytes) although {beside} "
                                     "stored file(s) are beside it: it was truncated.",
                                     hint="Open the store with recovery enabled, which moves it aside and keeps "
                                          "the files, or move it aside yourself.")
                else:
                    recovered_from = cls._move_aside(db)
                    log.warning("The results database %s was an empty file (0 bytes) although %d stored file(s) "
                                "are beside it: it was truncated (a crash or a full disk). It was moved to %s and "
                                "a fresh store was created; the files are kept. `nemo cache salvage %s` recovers "
                                "what its write-ahead log still holds, `nemo cache discard %s` gives it up.",
                                db, beside, recovered_from, recovered_from, recovered_from)
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
                log.warning("The results database %s could not be read (%s); it was moved to %s and a fresh "
                            "store was created. The artifact files of the old results are kept: `nemo cache "
                            "salvage %s` recovers what is still readable, `nemo cache discard %s` gives it up.",
                            db, exc, recovered_from, recovered_from, recovered_from)
                try:
                    conn = cls._connect(db)
                except sqlite3.Error as exc2:
                    raise cls._open_error(exc2, db) from exc2
        return cls(conn, db, art, recovered_from, opened_empty)

    @classmethod
    def open_read_only(cls, db_path: str | os.PathLike, artifacts_dir: str | os.PathLike | None = None
                       ) -> "ResultsStore":
        """The store for reading only, changing nothing on disk: no folders, no lock file, no WAL switch, no
        schema upgrade, no recovery. For a store on read-only media (a DVD, a read-only mount or share) or one the
        user may not write to. SQLite's `mode=ro` first; where that cannot open the file (a write-ahead-log
        database needs its shared-memory file, which read-only media cannot create) `immutable=1`, which reads
        the file as it is (committed results only; nothing can change it there)."""
        from urllib.parse import quote

        db = Path(db_path)
        if not db.is_file():
            raise StoreError(f"There is no results database at {db}.",
                             hint="Point NEMO_HOME at the folder that holds store/results.sqlite.")
        art = Path(artifacts_dir) if artifacts_dir else db.parent / "artifacts"
        last: sqlite3.Error | None = None
        for flags in ("mode=ro", "mode=ro&immutable=1"):
            conn = sqlite3.connect(f"file:{quote(str(db.resolve()))}?{flags}", uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            except sqlite3.Error as exc:
                conn.close()
                last = exc
                continue
            if version > CURRENT_VERSION:
                conn.close()
                raise StoreError(f"The results database {db} was written by a newer NEMO Desktop (schema "
                                 f"{version}; this one reads up to {CURRENT_VERSION}).",
                                 hint="Inspect it with the newer version.")
            store = cls(conn, db, art)
            store.read_only = "immutable" if "immutable" in flags else "read-only"
            return store
        raise cls._open_error(last, db) if last is not None else StoreError(f"{db} could not be opened.")

    @staticmethod
    def _is_empty_file(db: Path) -> bool:
        try:
            return db.stat().st_size == 0
        except OSError:
            return False

    @staticmethod
    def _files_beside(db: Path, art: Path) -> int:
        """How many stored files sit beside a database: artifact files, arrays and a non-empty write-ahead log.
        Any of them means the database held results once, so an empty database file there was truncated."""
        n = 0
        if art.is_dir():
            n += sum(1 for p in art.glob("*/*") if p.is_file() and not p.name.endswith(TMP_SUFFIX))
        arrays = db.parent / "arrays"
        if arrays.is_dir():
            n += sum(1 for _ in arrays.glob("*.npy"))
        wal = db.with_name(db.name + "-wal")
        with contextlib.suppress(OSError):
            n += wal.stat().st_size > 0
        return n

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
        if head and head != _SQLITE_MAGIC:  # an empty file with nothing beside it is a valid, empty database
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

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise StoreError(f"The results store {self.db_path} was opened read-only: nothing can be written to it.",
                             hint="Open it from a writable copy or location to store results.")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE): commit on success, roll back on any exception; nests."""
        self._refuse_if_read_only()
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
        self._refuse_if_read_only()
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
            raise write_error("artifact file", path, exc, self.store_dir) from exc

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

        Clearing everything also tidies leftovers of interrupted writes (see cleanup(): unused artifact files
        go to the quarantine)."""
        cond, params = ("WHERE r.kind = ?", (kind,)) if kind is not None else ("", ())
        with self.transaction() as conn:
            files = set(conn.execute("SELECT DISTINCT a.sha256, a.ext FROM result_artifacts a JOIN results r "
                                     f"ON r.key = a.result_key {cond}", params))
            n = conn.execute(f"DELETE FROM results {cond.replace('r.', '')}", params).rowcount
            self._unlink_if_unreferenced(conn, files)
        if kind is None:
            self.cleanup()
        return n

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
