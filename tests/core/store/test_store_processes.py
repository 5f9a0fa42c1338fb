"""Real processes: two writers at once, and writers killed with SIGKILL in the middle of writing."""
from __future__ import annotations

import sqlite3

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from nemo_desktop.core.store import ResultsStore, result_key
from nemo_desktop.core.store import maintenance, sqlite_errors

CHILD = Path(__file__).with_name("store_writer_child.py")


def spawn(*args) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, str(CHILD), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def wait_for_line(proc: subprocess.Popen, prefix: str, timeout: float = 60.0) -> list[str]:
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith(prefix):
            return lines
    proc.kill()
    raise AssertionError(f"child never printed {prefix!r}; got {lines[-5:]}; stderr: {proc.stderr.read()[-2000:]}")


def test_two_processes_writing_at_once(db_path, tmp_path):
    go = tmp_path / "go"
    procs = [spawn(db_path, name, 200, "plain", go) for name in ("alpha", "beta")]  # both open a fresh DB
    for p in procs:
        wait_for_line(p, "READY")
    go.touch()  # start both write loops together
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        assert out.count("PUT ") == 200
    with ResultsStore.open(db_path=db_path) as s:
        assert s.info()["results"] == 400
        for name in ("alpha", "beta"):
            for i in range(200):
                r = s.get(result_key("test", writer=name, i=i))
                assert r is not None and r.payload == {"writer": name, "i": i}
                assert r.artifact_bytes("shared") == b"same bytes in every result"
        assert s.info()["artifact_files"] == 1  # deduplicated across processes
        assert s._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert s.check() == []


def test_two_processes_writing_their_own_files_at_once_keep_every_byte(db_path, tmp_path):
    """Issue 34 §1 (a supervised worker writing beside the app): each process writes results with its own image,
    array and bytes files at the same time; every row of both is there, and every file holds what was written."""
    go = tmp_path / "go"
    procs = [spawn(db_path, name, 25, "artifacts", go) for name in ("app", "worker")]
    for p in procs:
        wait_for_line(p, "READY")
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        assert out.count("PUT ") == 25
    with ResultsStore.open(db_path=db_path) as s:
        rows = s.find("crash")
        assert sorted((r.payload["writer"], r.payload["i"]) for r in rows) == sorted(
            (w, i) for w in ("app", "worker") for i in range(25))
        for r in rows:
            expected_artifacts_match(r)
        assert s.info()["artifact_files"] == 2 * 25 * 3
        assert s.check() == []  # no temp file, orphan or corrupt file left behind


def test_cleanup_racing_a_writer_never_costs_a_committed_file(db_path):
    """cleanup() in one process while another writes: files written before the writer's transaction look
    like orphans (and their temp files like leftovers) to the cleanup; put() must repair that."""
    proc = spawn(db_path, "w", 80, "unique")
    wait_for_line(proc, "READY")
    removed = {"tmp": 0, "orphans": 0}
    with ResultsStore.open(db_path=db_path) as s:
        while proc.poll() is None:
            for k, v in s.cleanup().items():
                removed[k] += v
            time.sleep(0.01)  # an app cleans up now and then, not in a tight loop that starves writers
        assert proc.returncode == 0, proc.stderr.read()[-3000:]
        rows = s.find("test")
        assert len(rows) == 80
        for r in rows:
            assert hashlib.sha256(r.artifact_bytes("blob")).hexdigest() == r.payload["blob_sha256"]
        assert s.check() == []
    print("removed while racing:", removed)  # shown with -s: how often the race was actually hit


def expected_artifacts_match(r) -> None:
    assert hashlib.sha256(r.artifact_bytes("blob")).hexdigest() == r.payload["blob_sha256"]
    assert float(r.load_array("array").astype(np.float64).sum()) == pytest.approx(r.payload["array_sum"])
    assert hashlib.sha256(r.load_image("image").tobytes()).hexdigest() == r.payload["image_pixels_sha256"]


@pytest.mark.parametrize("kill_after", [7, 23])
def test_process_killed_while_writing_leaves_nothing_half_written(db_path, kill_after):
    proc = spawn(db_path, "victim", 10_000, "artifacts")
    wait_for_line(proc, "READY")
    lines = wait_for_line(proc, f"PUT {kill_after - 1} ")
    proc.send_signal(signal.SIGKILL)  # somewhere inside put number `kill_after` (or just after it)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    committed = [ln.split()[2] for ln in lines if ln.startswith("PUT ")]
    assert len(committed) == kill_after

    with ResultsStore.open(db_path=db_path) as s:
        rows = s.find("crash")
        keys = {r.key for r in rows}
        assert set(committed) <= keys  # everything reported as written survived the kill
        assert len(keys) <= kill_after + 1  # at most the put in flight, and only if it completed
        for r in rows:
            assert set(r.artifacts) == {"image", "array", "blob"}
            expected_artifacts_match(r)
        problems = s.check()
        allowed = (maintenance.PROBLEM_TMP, maintenance.PROBLEM_ORPHAN)  # harmless leftovers of the interrupted put
        assert all(p.startswith(allowed) for p in problems), problems
        s.cleanup()
        assert s.check() == []
        assert {r.key for r in s.find("crash")} == keys
        s.put("after", "crash", {"ok": 1})  # the store keeps working
        assert s.has("after")


def test_killed_after_insert_before_commit_shows_nothing(db_path):
    proc = spawn(db_path, "x", 1, "die-before-commit")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and "PUT" not in out
    with ResultsStore.open(db_path=db_path) as s:
        assert s.find() == [] and not s.has("doomed-x-0")
        problems = s.check()
        # the artifact was written (files first), the row never committed: one orphan, nothing else
        assert len(problems) == 1 and problems[0].startswith(maintenance.PROBLEM_ORPHAN), problems
        assert s.cleanup() == {"tmp": 0, "orphans": 1}
        assert s.check() == []


def test_killed_between_temp_file_and_rename_shows_nothing(db_path):
    proc = spawn(db_path, "x", 1, "die-before-rename")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and "PUT" not in out
    with ResultsStore.open(db_path=db_path) as s:
        assert s.find() == []
        problems = s.check()
        assert len(problems) == 1 and problems[0].startswith(maintenance.PROBLEM_TMP), problems
        leftovers = list(s.artifacts_dir.rglob("*.tmp"))
        assert len(leftovers) == 1 and leftovers[0].stat().st_size == 4096  # complete, but never renamed
        assert s.cleanup() == {"tmp": 1, "orphans": 0}
        assert s.check() == [] and list(s.artifacts_dir.rglob("*.tmp")) == []


_OPEN_AT_GO = """
import sys, time
from pathlib import Path
from nemo_desktop.core.store import ResultsStore
db, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.0005)
with ResultsStore.open(db_path=db) as s:
    print("OK", s.info()["journal_mode"])
"""


def test_processes_opening_a_fresh_store_at_the_same_moment(tmp_path):
    """SQLite refuses the loser of two simultaneous switches to WAL without waiting; opening must retry."""
    for round_ in range(3):
        db, go = tmp_path / f"r{round_}" / "results.sqlite", tmp_path / f"go{round_}"
        procs = [subprocess.Popen([sys.executable, "-c", _OPEN_AT_GO, str(db), str(go)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(6)]
        time.sleep(1.0)  # let the interpreters start
        go.touch()
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and out.strip() == "OK wal", err[-2000:]


class _FlakyConnection:
    """Test double: answers the WAL switch with SQLite's busy error `busy_times` times."""

    def __init__(self, busy_times: int, error: str = "database is locked"):
        self.busy_times, self.error, self.calls = busy_times, error, 0

    def execute(self, sql):
        self.calls += 1
        if self.calls <= self.busy_times:
            raise sqlite3.OperationalError(self.error)
        return self

    def fetchone(self):
        return ("wal",)


def test_enable_wal_retries_a_busy_switch_until_the_timeout():
    conn = _FlakyConnection(busy_times=3)
    assert sqlite_errors.enable_wal(conn, timeout_s=5) == "wal" and conn.calls == 4
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        sqlite_errors.enable_wal(_FlakyConnection(busy_times=10**6), timeout_s=0.05)
    other = _FlakyConnection(busy_times=1, error="disk I/O error")  # not busy: no retry
    with pytest.raises(sqlite3.OperationalError, match="disk"):
        sqlite_errors.enable_wal(other, timeout_s=5)
    assert other.calls == 1
