"""`nemo bench run` killed with SIGKILL in the middle of a run, then run again: nothing lost, nothing twice."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from bench_world import base_config
from nemo_desktop.core.benchmark.records import DONE, SAMPLE_KIND

CHILD = Path(__file__).with_name("bench_child.py")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL")


def spawn(config: Path, store: Path, summary: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NEMO_HOME": str(store.parent / "home")}
    return subprocess.Popen([sys.executable, str(CHILD), "bench", "run", str(config), "--store", str(store),
                             "--json", str(summary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def done_items(store_dir: Path, run_id: str) -> dict[str, str]:
    from nemo_desktop.core.store import ResultsStore

    db = store_dir / "results.sqlite"
    if not db.exists():
        return {}
    s = ResultsStore.open(db_path=db, artifacts_dir=store_dir / "artifacts")
    try:
        return {it["item_id"]: it["result_key"] for it in s.run_items(run_id) if it["status"] == DONE}
    except Exception:  # noqa: BLE001 - the run may not exist yet
        return {}
    finally:
        s.close()


def test_kill_9_mid_run_then_resume_loses_nothing_and_repeats_nothing(bench_data, tmp_path):
    from nemo_desktop.core.benchmark.config import parse_config

    log = tmp_path / "mllm-calls.jsonl"
    cfg = base_config(bench_data, datasets=base_config(bench_data)["datasets"][:2], samples_per_dataset=3,
                      classifiers={"ViT": "test-double:coded-imagenet"},
                      mllms={"Qwen": {"family": "test-double", "source": "scripted",
                                      "options": {"delay": 0.12, "log": str(log)}}})
    config = tmp_path / "bench.json"
    config.write_text(json.dumps(cfg))
    run_id = parse_config(cfg).run_id
    store = tmp_path / "store"
    total = 2 * 3

    proc = spawn(config, store, tmp_path / "first.json")
    deadline = time.monotonic() + 120
    before: dict[str, str] = {}
    while time.monotonic() < deadline and proc.poll() is None:
        before = done_items(store, run_id)
        if len(before) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()}"
    time.sleep(0.3)  # now inside the next sample
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = done_items(store, run_id)
    assert 2 <= len(before) < total
    calls_first = log.read_text().splitlines()

    proc = spawn(config, store, tmp_path / "second.json")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    summary = json.loads((tmp_path / "second.json").read_text())
    assert summary["finished_before"] == len(before) and summary["computed"] == total - len(before)
    assert summary["statuses"] == {DONE: total} and summary["complete"]

    after = done_items(store, run_id)
    assert len(after) == total
    assert all(after[k] == v for k, v in before.items())  # finished samples kept, untouched

    from nemo_desktop.core.store import ResultsStore

    s = ResultsStore.open(db_path=store / "results.sqlite", artifacts_dir=store / "artifacts")
    try:
        assert len(s.run_items(run_id)) == total
        assert len(s.find(kind=SAMPLE_KIND)) == total and len(s.find(kind="explanation")) == total
        serious = [p for p in s.check() if not p.startswith(("leftover temp file", "orphan artifact"))]
        assert serious == []
    finally:
        s.close()

    # No model call was made twice, except at most the one in flight when the process was killed.
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    asked = Counter((c["prompt"], tuple(c["images"]), c["temperature"], c["seed"]) for c in calls)
    repeated = [k for k, n in asked.items() if n > 1]
    assert len(repeated) <= 1, repeated
    assert len(calls) > len(calls_first)


def test_resume_removes_the_temporary_file_of_a_write_killed_midway(bench_data, store):
    """A kill inside an artifact write leaves its temporary file; the resumed run removes it, so `nemo cache
    check` is clean afterwards (temporary files of writers still running are kept: see test_store_processes)."""
    from bench_world import base_config, doubles_loader
    from fixtures_tiny.killed_writer import kill_during_artifact_write
    from nemo_desktop.core.benchmark.config import parse_config
    from nemo_desktop.core.benchmark.runner import BenchmarkRunner
    from nemo_desktop.core.store.db import PROBLEM_TMP

    left = kill_during_artifact_write(store.db_path, store.artifacts_dir)
    assert len(left) == 1 and any(p.startswith(PROBLEM_TMP) for p in store.check())
    BenchmarkRunner(parse_config(base_config(bench_data)), store, loader=doubles_loader()).run()
    assert not left[0].exists() and store.check() == []
