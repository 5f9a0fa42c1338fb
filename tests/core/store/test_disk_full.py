"""A full disk: the log degrades to one warning and the console, and the store says "the disk is full" and what
can be freed. On a real small filesystem (a tmpfs mounted for the test, where the test may mount one) and with
a simulated ENOSPC everywhere else."""
from __future__ import annotations

import errno
import logging
import os
import sqlite3
import subprocess

import pytest

from nemo_desktop.core.app import logging_setup
from nemo_desktop.core.base.errors import StoreError
from nemo_desktop.core.store import ResultsStore
from nemo_desktop.core.store.paths import get_paths


def _fill(folder) -> None:
    """Write a file until the disk says no."""
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small filesystem here (needs root); the simulated ENOSPC tests cover it")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def logging_restored():
    yield
    root = logging.getLogger()
    for h in list(logging_setup._installed.values()):
        root.removeHandler(h)
        h.close()
    logging_setup._installed.clear()


def _log_a_report(n=60):
    log = logging.getLogger("nemo_desktop.test.report")
    for i in range(n):
        log.info("step %d of a report", i)
    log.warning("the real problem, said once")


def test_full_log_disk_gives_one_warning_then_the_console(small_disk, logging_restored, capsys):
    home = small_disk / "home"
    log_file = logging_setup.setup_logging(get_paths(home))
    logging.getLogger("nemo_desktop.test").info("written while there is space")
    _fill(small_disk)
    _log_a_report()
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err
    assert err.count(f"cannot write the log file {log_file} (the disk is full)") == 1
    assert "the real problem, said once" in err  # warnings still reach the user
    assert "step 5 of a report" not in err  # info records are not dumped on the console


def test_log_write_failure_simulated_enospc(tmp_path, logging_restored, capsys):
    log_file = logging_setup.setup_logging(get_paths(tmp_path / "home"))
    handler = logging_setup._installed[str(log_file)]

    class FullDisk:  # a log file whose disk filled up after it was opened
        def seek(self, *args):
            return 0

        def tell(self):
            return 0

        def write(self, _text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            pass

    handler.stream = FullDisk()
    _log_a_report()
    err = capsys.readouterr().err
    assert "Logging error" not in err
    assert err.count("(the disk is full); warnings and errors go to the console") == 1
    assert "the real problem, said once" in err


def test_store_on_a_full_disk_says_the_disk_is_full(small_disk):
    with ResultsStore.open(db_path=small_disk / "store" / "results.sqlite") as store:
        store.put("kept", "x", {"ok": True}, {"a": b"first"})
        _fill(small_disk)
        with pytest.raises(StoreError) as err:  # an artifact file: ENOSPC from the atomic write
            store.put("k1", "x", {"i": 1}, {"a": os.urandom(64_000)})
        assert err.value.message.startswith("The disk is full") and "0 bytes free" in err.value.message
        assert "nemo cache clear" in err.value.hint and "NEMO_HOME" in err.value.hint
        with pytest.raises(StoreError) as err:  # only rows: SQLite's "database or disk is full"
            store.put("k2", "x", {"text": "y" * 400_000})
        assert err.value.message.startswith("The disk is full"), err.value.message
        (small_disk / "filler").unlink()
        assert store.get("kept").payload == {"ok": True}  # nothing completed was lost
        store.put("k3", "x", {"i": 3})  # and it works again once space is freed


def test_sqlite_io_error_reads_as_disk_full_only_when_the_disk_is_full(tmp_path, monkeypatch):
    from nemo_desktop.core.store import disk_space, sqlite_errors

    def io_error():
        exc = sqlite3.OperationalError("disk I/O error")
        exc.sqlite_errorcode = 778  # SQLITE_IOERR_WRITE
        return exc

    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 0)
    full = sqlite_errors._translate(io_error(), tmp_path / "results.sqlite")
    assert full.message.startswith("The disk is full") and "nemo cache clear" in full.hint
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 50 * 2 ** 30)
    other = sqlite_errors._translate(io_error(), tmp_path / "results.sqlite")
    assert "I/O error" in other.message and "disk is full" not in other.message
    enospc = sqlite_errors._translate(sqlite3.OperationalError("database or disk is full"), tmp_path / "r.sqlite")
    assert enospc is None or "disk is full" in enospc.message  # no error code: left to the generic handling
