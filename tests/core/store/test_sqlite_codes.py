"""SQLite result codes from sqlite3 exceptions: `sqlite_errorcode` where Python has it (3.11+), else SQLite's
own message (3.10), so busy/full/corrupt databases are told apart on every supported Python."""
from __future__ import annotations

import sqlite3

import pytest

from nemo_desktop.core.store.sqlite_codes import primary_code


@pytest.mark.parametrize(("message", "code"), [
    ("database is locked", 5), ("database table is locked", 6), ("attempt to write a readonly database", 8),
    ("disk I/O error", 10), ("database disk image is malformed", 11), ("database or disk is full", 13),
    ("unable to open database file", 14), ("file is not a database", 26), ("no such table: x", None),
])
def test_the_message_gives_the_code_where_python_does_not(message, code):
    exc = sqlite3.OperationalError(message)  # as Python 3.10 raises it: no sqlite_errorcode attribute
    assert not hasattr(exc, "sqlite_errorcode") and primary_code(exc) == code


def test_the_attribute_wins_and_extended_codes_give_their_primary():
    exc = sqlite3.OperationalError("disk I/O error")
    exc.sqlite_errorcode = 778  # SQLITE_IOERR_WRITE
    assert primary_code(exc) == 10
    exc.sqlite_errorcode = 13
    assert primary_code(exc) == 13  # the code, not the text


def test_a_real_error_reads_the_same_on_this_python(tmp_path):
    (tmp_path / "x.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError) as err:
        sqlite3.connect(tmp_path / "x.sqlite").execute("SELECT * FROM sqlite_master")
    assert primary_code(err.value) == 26
