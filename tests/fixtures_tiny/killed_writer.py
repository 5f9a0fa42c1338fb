"""A process killed with SIGKILL in the middle of an artifact write: the store's atomic writer has created its
temporary file and is inside fsync when the kill comes, exactly the window a real kill can hit."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

_CHILD = """
import sys, time
from nemo_desktop.core.store import ResultsStore, atomic
store = ResultsStore.open(db_path=sys.argv[1], artifacts_dir=sys.argv[2])
def hang(fd):
    print("WRITING", flush=True)
    time.sleep(120)
atomic.os.fsync = hang  # this process only
store.put("killed-mid-write", "x", {"i": 1}, {"a": b"half written" * 1000})
"""


def kill_during_artifact_write(db_path: Path, artifacts_dir: Path) -> list[Path]:
    """Run the write in a child, SIGKILL it inside fsync; returns the temporary files it left."""
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(db_path), str(artifacts_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "WRITING", proc.stderr.read()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return [p for p in Path(artifacts_dir).rglob("*.tmp")]
