""""The disk is full", said as such: recognising a full disk behind an OSError or an SQLite error, and a
StoreError that says how much is free and what can be freed.

SQLite reports a full disk as SQLITE_FULL ("database or disk is full") when a write runs out of space, but as
SQLITE_IOERR ("disk I/O error") when the shortage hits an fsync, the WAL index or a temporary file; the second
is read as a full disk only when the disk really has (almost) nothing left.
"""
from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

from ..base.errors import StoreError
from .sqlite_codes import primary_code

_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_SQLITE_IOERR, _SQLITE_FULL = 10, 13
NEARLY_FULL_BYTES = 8 * 1024 * 1024  # below this, an SQLite I/O error is taken for the full disk it is


def free_bytes(path: Path) -> int | None:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def is_disk_full(exc: BaseException, path: Path) -> bool:
    if isinstance(exc, sqlite3.Error):
        primary = primary_code(exc)
        if primary == _SQLITE_FULL:
            return True
        if primary != _SQLITE_IOERR:
            return False
        free = free_bytes(path)
        return free is not None and free < NEARLY_FULL_BYTES
    return isinstance(exc, OSError) and exc.errno in _NO_SPACE


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


def _folder_size(folder: Path) -> int:
    total = 0
    if folder.is_dir():
        for p in folder.rglob("*"):
            try:
                total += p.stat().st_size if p.is_file() else 0
            except OSError:
                pass
    return total


def disk_full_error(path: Path, exc: BaseException, store_dir: Path | None = None) -> StoreError:
    """The StoreError for a write to `path` that failed because its disk is full."""
    free = free_bytes(path)
    store_dir = store_dir or Path(path).parent
    used = _folder_size(store_dir)
    return StoreError(
        f"The disk is full: {path} could not be written"
        + (f" ({_size(free)} free on that disk)." if free is not None else "."),
        hint=f"Free space on the disk that holds {store_dir}: the results store there uses {_size(used)}; "
             "`nemo cache clear --kind KIND` (or `nemo cache clear`) removes stored results, "
             "`nemo cache check --repair` removes leftovers of interrupted writes, unused model weights in the "
             "Hugging Face cache can be removed with `hf cache delete`; or move the store to another disk with "
             "NEMO_HOME. Completed results are kept; a re-run resumes.",
        detail=repr(exc))


def write_error(what: str, path: Path, exc: OSError, store_dir: Path | None = None) -> StoreError:
    """The StoreError for a failed write of `what` (e.g. "array file") to `path`: the disk-full one when that is
    the cause, otherwise one that names the file."""
    if is_disk_full(exc, path):
        return disk_full_error(path, exc, store_dir)
    return StoreError(f"Could not write the {what} {path}.",
                      hint="Check free disk space and the store folder's permissions.", detail=repr(exc))
