"""Recovering results from a damaged results database that was moved aside (`<db>.corrupt-<time>`).

SQLite's own tool for this, the sqlite3 shell's `.recover`, needs the `sqlite_dbpage` virtual table, and the
SQLite builds at hand lack it (Debian's sqlite3 3.40.1 shell answers "SQL logic error" and recovers nothing;
APSW 3.54's bundled SQLite has no dbpage either), while `Connection.iterdump()` stops at the first damaged page.
So the walk is done here, with plain SQL on a copy of the file: each table is read in rowid order; when a read
fails on a damaged page, the walk looks for the first rowid past the damage that reads again (doubling the
jump, then bisecting back) and goes on from there. Only the damaged pages' rows are lost.

Recovered into the live store: results whose artifact references are readable and whose artifact files are all
present (a result without its files would only be reported as broken), and benchmark runs with their items.
Reference indexes are not copied: a re-run of `nemo index` rebuilds them from the images. The damaged file is
never changed; the copy gets its SQLite header restored if that was overwritten (the commonest damage that
makes a whole file unreadable).
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..base.errors import ConfigError, StoreError

log = logging.getLogger(__name__)

_MAGIC = b"SQLite format 3\x00"
ASIDE_RE = re.compile(r"\.corrupt-\d{8}-\d{6}(-\d+)?$")
_BATCH = 256
_MAX_ROWID = 2 ** 62


@dataclass
class SalvageReport:
    source: Path
    results: int = 0  # copied into the store
    results_existing: int = 0  # already in the store (same key)
    results_missing_files: int = 0  # recovered rows whose artifact files are gone: not copied
    results_unreadable_refs: int = 0  # recovered rows whose artifact references were on damaged pages
    runs: int = 0
    run_items: int = 0
    damaged_regions: int = 0  # places where the walk had to skip damaged pages
    files_from_quarantine: int = 0  # artifact files moved back from the quarantine for recovered results
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def aside_databases(db_path: Path) -> list[Path]:
    """Moved-aside copies of `db_path` (not their -wal/-shm side files), oldest first."""
    if not db_path.parent.is_dir():
        return []
    return sorted(p for p in db_path.parent.glob(db_path.name + ".corrupt-*") if ASIDE_RE.search(p.name))


def _restore_header(copy: Path) -> None:
    with open(copy, "r+b") as f:
        head = f.read(len(_MAGIC))
        if head and head != _MAGIC:
            f.seek(0)
            f.write(_MAGIC)


class _Walker:
    """Reads a rowid table of a damaged database, skipping the rowid ranges whose pages cannot be read."""

    def __init__(self, conn: sqlite3.Connection, report: SalvageReport):
        self.conn, self.report = conn, report

    def _batch(self, table: str, columns: str, after: int) -> list[tuple]:
        return self.conn.execute(f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                                 (after, _BATCH)).fetchall()

    def _reads(self, table: str, after: int) -> bool:
        try:
            self.conn.execute(f"SELECT rowid FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT 1",
                              (after,)).fetchall()
            return True
        except sqlite3.DatabaseError:
            return False

    def _past_damage(self, table: str, bad: int) -> int | None:
        """The smallest `after` > bad from which reading works again, or None when nothing further reads."""
        step, good = 1, None
        while bad + step < _MAX_ROWID:
            if self._reads(table, bad + step):
                good = bad + step
                break
            step *= 2
        if good is None:
            return None
        lo, hi = bad + step // 2, good  # lo fails (or is the start), hi reads
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if self._reads(table, mid) else (mid, hi)
        return hi

    def rows(self, table: str, columns: str) -> Iterator[tuple]:
        after = -_MAX_ROWID
        while True:
            try:
                batch = self._batch(table, columns, after)
            except sqlite3.DatabaseError:
                batch = []
                for _ in range(_BATCH):  # read one by one up to the damaged row
                    try:
                        one = self.conn.execute(f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? "
                                                "ORDER BY rowid LIMIT 1", (after,)).fetchall()
                    except sqlite3.DatabaseError:
                        break
                    if not one:
                        break
                    batch.append(one[0])
                    after = one[0][0]
                yield from (r[1:] for r in batch)
                if len(batch) == _BATCH:
                    continue
                self.report.damaged_regions += 1
                resume = self._past_damage(table, after)
                if resume is None:
                    return
                after = resume
                continue
            if not batch:
                return
            yield from (r[1:] for r in batch)
            after = batch[-1][0]


SALVAGE_STAGE = "Salvaging results"


def salvage_into(store, source: Path, ctx: Any = None) -> SalvageReport:
    """Copy the results and runs still readable in `source` (a moved-aside database) into `store`. `ctx` (a
    JobContext) gets the progress over the results and can cancel (the results' transaction is then rolled back;
    a re-run starts over)."""
    source = Path(source)
    if not source.is_file():
        raise ConfigError(f"{source} does not exist.", hint="Give a file listed by `nemo cache check`.")
    report = SalvageReport(source)
    if source.stat().st_size == 0:
        wal = source.with_name(source.name + "-wal")
        report.notes.append(
            f"{source} is an empty file (0 bytes): it was truncated, and its results are gone"
            + (" except what its write-ahead log still held (recovered here)." if wal.is_file() and
               wal.stat().st_size else ".")
            + f" The artifact files beside it are kept until `nemo cache discard {source}`; `nemo cache check "
              "--repair` then moves them to the quarantine, it does not delete them.")
    with tempfile.TemporaryDirectory(prefix="nemo-salvage-") as tmp:
        copy = Path(tmp) / "damaged.sqlite"
        shutil.copyfile(source, copy)
        wal = source.with_name(source.name + "-wal")  # moved aside with it: it holds the newest commits
        if wal.is_file():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        _restore_header(copy)
        src = sqlite3.connect(copy)
        try:
            try:
                tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"Nothing can be salvaged from {source}: its table list is damaged ({exc}).",
                                 hint=f"Discard it with `nemo cache discard {source}`.") from exc
            walker = _Walker(src, report)
            if "results" in tables:
                _copy_results(store, src, walker, report, has_refs="result_artifacts" in tables, ctx=ctx)
            if "runs" in tables:
                _copy_runs(store, walker, report, has_items="run_items" in tables)
            if "indexes" in tables:
                report.notes.append("Reference indexes are not salvaged; `nemo index` rebuilds them.")
        finally:
            src.close()
    return report


def _copy_results(store, src: sqlite3.Connection, walker: _Walker, report: SalvageReport, *,
                  has_refs: bool, ctx: Any = None) -> None:
    rows = [r for r in walker.rows("results", "key, kind, payload, created_at") if r[0] and r[1] and r[2]]
    quarantined = _quarantined_files(store)
    with store.transaction() as conn:
        for n, (key, kind, payload, created_at) in enumerate(rows):
            if ctx is not None and n % 200 == 0:
                ctx.check_cancelled()
                ctx.progress(SALVAGE_STAGE, n, len(rows))
            try:  # an index seek per result: a damaged page loses only the results whose references it held
                files = src.execute("SELECT name, sha256, ext, size FROM result_artifacts WHERE result_key = ?",
                                    (key,)).fetchall() if has_refs else []
            except sqlite3.DatabaseError:
                report.results_unreadable_refs += 1
                continue
            if not all(_present(store, sha, ext, quarantined, report) for _, sha, ext, _ in files):
                report.results_missing_files += 1
                continue
            cur = conn.execute("INSERT OR IGNORE INTO results(key, kind, payload, created_at) VALUES (?, ?, ?, ?)",
                               (key, kind, payload, created_at or 0.0))
            if cur.rowcount == 0:
                report.results_existing += 1
                continue
            conn.executemany("INSERT OR IGNORE INTO result_artifacts(result_key, name, sha256, ext, size) "
                             "VALUES (?, ?, ?, ?, ?)", [(key, *f) for f in files])
            report.results += 1
    if ctx is not None:
        ctx.progress(SALVAGE_STAGE, len(rows), len(rows))


def _quarantined_files(store) -> dict[Path, Path]:
    """Quarantined artifact files by their place in the artifacts folder (newest folder wins)."""
    from . import quarantine

    found: dict[Path, Path] = {}
    for folder in quarantine.folders(store.store_dir):
        for p in folder.path.rglob("*"):
            if p.is_file():
                found[store.artifacts_dir / p.relative_to(folder.path)] = p
    return found


def _present(store, sha: str, ext: str, quarantined: dict[Path, Path], report: SalvageReport) -> bool:
    """Whether an artifact file is in place; one found in the quarantine (a repair moved it there before the
    salvage) is moved back first."""
    path = store._artifact_path(sha, ext)
    if path.is_file():
        return True
    q = quarantined.get(path)
    if q is None or not q.is_file():
        return False
    from .quarantine import move_back

    move_back(q, path)
    report.files_from_quarantine += 1
    return True


def _copy_runs(store, walker: _Walker, report: SalvageReport, *, has_items: bool) -> None:
    runs = [r for r in walker.rows("runs", "run_id, kind, config, created_at, status") if r[0]]
    items = [r for r in walker.rows("run_items", "run_id, item_id, result_key, status, error, updated_at")
             if r[0] and r[1]] if has_items else []
    with store.transaction() as conn:
        for run in runs:
            report.runs += conn.execute("INSERT OR IGNORE INTO runs(run_id, kind, config, created_at, status) "
                                        "VALUES (?, ?, ?, ?, ?)", run).rowcount
        known = {r[0] for r in conn.execute("SELECT run_id FROM runs")}
        for item in items:
            if item[0] in known:
                report.run_items += conn.execute(
                    "INSERT OR IGNORE INTO run_items(run_id, item_id, result_key, status, error, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)", item).rowcount


def move_aside_and_salvage(store, ctx: Any = None) -> tuple[Any, Path, SalvageReport]:
    """What `nemo cache check --repair` does for a damaged database (check() reports it under "database"): closes
    `store`, moves its database aside to `<database>.corrupt-<YYYYmmdd-HHMMSS>` (with its -wal/-shm), opens a
    fresh database in its place and salvages the readable results and runs into it. The moved-aside file and the
    artifact files are kept (`nemo cache discard` gives them up). Returns (the fresh store, the moved-aside file,
    the salvage report)."""
    from .db import ResultsStore, _open_lock

    db, art = store.db_path, store.artifacts_dir
    store.close()
    with _open_lock(db):
        aside = ResultsStore._move_aside(db)
    fresh = ResultsStore.open(db_path=db, artifacts_dir=art)
    return fresh, aside, salvage_into(fresh, aside, ctx)


def discard(db_path: Path, aside: Path) -> None:
    """Delete a moved-aside database (and its -wal/-shm): its artifact files become ordinary orphans."""
    aside = Path(aside)
    if aside.resolve().parent != db_path.resolve().parent or not aside.name.startswith(db_path.name) \
            or not ASIDE_RE.search(aside.name):
        raise ConfigError(f"{aside} is not a moved-aside copy of {db_path}.",  # a wrong FILE argument: usage
                         hint="Give a file listed by `nemo cache check` (named <database>.corrupt-<time>).")
    for p in (aside, aside.with_name(aside.name + "-wal"), aside.with_name(aside.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(p)
