"""Looking after the results store: what it holds (info), what is wrong with it (check) and tidying the leftovers of
interrupted writes (cleanup: temp files are removed, unused artifact files are quarantined, see quarantine.py)."""
from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

from . import quarantine
from .atomic import TMP_SUFFIX, temp_writer_alive
from .keys import content_hash
from .migrations import user_version
from .sqlite_errors import _is_corruption

# Prefixes of the strings check() returns; callers may group problems by them.
PROBLEM_DATABASE = "database"
PROBLEM_MISSING = "missing artifact"
PROBLEM_CORRUPT = "corrupt artifact"
PROBLEM_TMP = "leftover temp file"
PROBLEM_ORPHAN = "orphan artifact"
PROBLEM_KEPT = "kept for salvage"
CHECK_STAGE = "Checking artifact files"  # check()'s progress stage


class MaintenanceMixin:
    """The maintenance methods of ResultsStore (needs its connection, lock and paths)."""

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
        quarantined = quarantine.folders(self.store_dir)
        return {"database": str(self.db_path), "artifacts_dir": str(self.artifacts_dir),
                "arrays_dir": str(self.arrays_dir), "schema_version": version, "journal_mode": journal,
                "database_bytes": db_bytes, "results": sum(per_kind.values()), "rows_per_kind": per_kind,
                "artifact_files": files, "artifact_bytes": nbytes, "arrays": len(arrays),
                "array_bytes": sum(p.stat().st_size for p in arrays), "runs": runs,
                "quarantined_files": sum(f.files for f in quarantined),
                "quarantined_bytes": sum(f.bytes for f in quarantined),
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
            return [f"{PROBLEM_DATABASE}: {self.db_path} is damaged ({exc}); `nemo cache check --repair` moves it "
                    f"aside (to {self.db_path.name}.corrupt-<time>) and salvages its readable results into a fresh "
                    "store"]
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
                    problems.append(f"{PROBLEM_ORPHAN}: {p} is not used by any result (usually left by an "
                                    f"interrupted write; `nemo cache check --repair` moves it to the quarantine)")
        for aside in asides if kept else ():
            problems.append(f"{PROBLEM_KEPT}: {aside} is a damaged database moved aside; {kept} artifact file(s) "
                            f"not used by the current database are kept because they may belong to it. "
                            f"`nemo cache salvage {aside}` recovers its readable results; `nemo cache discard "
                            f"{aside}` gives it up, after which `nemo cache check --repair` moves those files to the "
                            f"quarantine")
        return problems

    def aside_databases(self) -> list[Path]:
        """Damaged databases moved aside next to this one and not yet discarded (see salvage.py)."""
        from .salvage import aside_databases

        return aside_databases(self.db_path)

    def cleanup(self, stale_after_s: float = 86_400.0) -> dict[str, int]:
        """Tidy the leftovers of interrupted writes: temp files are removed; artifact files no result uses
        ("orphans") are moved to a new dated quarantine folder, never deleted (`nemo cache quarantine` lists,
        restores and purges it): an orphan is usually a crash leftover, but every file of a lost database looks
        the same. While a damaged database moved aside is not discarded, unused artifact files stay where they
        are: they may be its results' files, which `nemo cache salvage` can bring back (check() reports how many).
        Returns {"tmp": removed, "orphans": quarantined}.

        A temp file is removed when the process that wrote it is gone (its pid is in the name) or it is
        older than `stale_after_s` (a writer on another machine sharing the folder). Orphans are moved under the
        write lock (the directory walk is not), so no row can start using a file while it moves; put()
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
            orphans = [p for p in artifact_files if p not in referenced]
            if orphans:
                folder = quarantine.new_folder(self.store_dir)
                for p in orphans:
                    removed["orphans"] += quarantine.move_into(folder, self.artifacts_dir, p)
                if not removed["orphans"]:
                    with contextlib.suppress(OSError):
                        folder.rmdir()
        return removed

    def quarantine_folders(self) -> list["quarantine.QuarantineFolder"]:
        """The quarantine folders (see quarantine.py), oldest first."""
        return quarantine.folders(self.store_dir)

    def restore_quarantine(self, name: str | None = None) -> dict[str, int]:
        """Move quarantined artifact files back (all folders, or the one named); see quarantine.restore()."""
        return quarantine.restore(self.store_dir, self.artifacts_dir, name)

    def purge_quarantine(self, name: str | None = None) -> dict[str, int]:
        """Delete quarantined artifact files for good (all folders, or the one named)."""
        return quarantine.purge(self.store_dir, name)

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
