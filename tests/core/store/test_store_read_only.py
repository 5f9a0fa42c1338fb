"""Issue 42 §3: a store on read-only media can be inspected. `nemo cache info` on a read-only mount (a real one:
a bind mount made read-only in a user namespace, `unshare -rm`) reports the store and changes nothing; the
read-only open itself (SQLite mode=ro, then immutable=1) creates no file beside the database."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_desktop.core.base.errors import StoreError
from nemo_desktop.core.store import ResultsStore
from nemo_desktop.core.store.paths import get_paths

ROOT = Path(__file__).resolve().parents[3]


def _fill(home: Path) -> None:
    with ResultsStore.open(get_paths(home).ensure()) as store:
        for i in range(3):
            store.put(f"{i:064d}", "explanation", {"i": i}, {"file": f"bytes {i}".encode()})


def _read_only_mount_works(folder: Path) -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount --bind -o ro '{folder}' '{folder}' && "
                            f"! touch '{folder}/probe' 2>/dev/null"], capture_output=True)
    return probe.returncode == 0 and not (folder / "probe").exists()


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_cache_info_reads_a_store_on_a_read_only_mount(tmp_path):
    home = tmp_path / "home"
    _fill(home)
    if not _read_only_mount_works(home):
        pytest.skip("no read-only bind mount here (needs unshare -rm: user and mount namespaces)")
    before = _snapshot(home)
    env = {**os.environ, "NEMO_HOME": str(home), "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount --bind -o ro '{home}' '{home}' && exec \"$@\"", "sh",
                          sys.executable, "-m", "nemo_desktop.cli.main", "cache", "info", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout)
    assert info["results"] == 3 and info["artifact_files"] == 3 and info["read_only"] in ("read-only", "immutable")
    assert "opened read-only" in run.stderr
    assert _snapshot(home) == before


def test_the_read_only_open_changes_nothing(tmp_path):
    home = tmp_path / "home"
    _fill(home)
    paths = get_paths(home)
    before = _snapshot(paths.database.parent)
    store = ResultsStore.open_read_only(paths.database, paths.artifacts_dir)
    try:
        assert store.read_only == "read-only" and store.info()["results"] == 3
        assert store.get(f"{1:064d}").artifacts["file"].read_bytes() == b"bytes 1"
        with pytest.raises(StoreError, match="opened read-only"):
            store.put("x" * 64, "explanation", {}, {"new": b"never written"})
    finally:
        store.close()
    after = {k: v for k, v in _snapshot(paths.database.parent).items() if not k.endswith(("-shm", "-wal"))}
    assert after == {k: v for k, v in before.items() if not k.endswith(("-shm", "-wal"))}
    with pytest.raises(StoreError, match="no results database"):
        ResultsStore.open_read_only(tmp_path / "nowhere" / "results.sqlite")
