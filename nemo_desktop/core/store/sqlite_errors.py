"""SQLite failures in words: environment errors (busy, disk full, damaged file, ...) become StoreErrors with what to
do; programming errors stay as they are. And the switch to WAL that two processes may race for."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ..base.errors import StoreError
from .disk_space import disk_full_error, is_disk_full
from .sqlite_codes import primary_code

BUSY_TIMEOUT_MS = 30_000
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes)
_SQLITE_BUSY = 5  # sqlite3.SQLITE_BUSY exists from Python 3.11 only
_ENVIRONMENT_CODES = {5: "busy", 6: "locked", 8: "read-only", 10: "I/O error", 13: "full", 14: "cannot open"}


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
