"""The primary SQLite result code of a sqlite3 exception, on every supported Python.

Python 3.11 added `exc.sqlite_errorcode`; on 3.10 the code is read back from the message, which for these codes
is SQLite's own fixed English text (sqlite3_errstr / sqlite3_errmsg)."""
from __future__ import annotations

# Longest first: "database table is locked" (6) must win over "database is locked" (5).
_MESSAGES = (
    ("database table is locked", 6),        # SQLITE_LOCKED
    ("database is locked", 5),              # SQLITE_BUSY
    ("attempt to write a readonly database", 8),  # SQLITE_READONLY
    ("disk i/o error", 10),                 # SQLITE_IOERR
    ("database disk image is malformed", 11),  # SQLITE_CORRUPT
    ("database or disk is full", 13),       # SQLITE_FULL
    ("unable to open database file", 14),   # SQLITE_CANTOPEN
    ("file is not a database", 26),         # SQLITE_NOTADB
)


def primary_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    text = str(exc).lower()
    return next((c for words, c in _MESSAGES if words in text), None)
