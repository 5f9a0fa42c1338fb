"""kill -9 in the middle of a model-difference run, then the same run again: it completes with the same result
as an uninterrupted run, every stored unit (measured condition, LLM reply, evaluator answer, iteration) is there
exactly once, and no request that completed before the kill is sent again."""
from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_tiny.model_diff_resume import build_pipeline

from nemo_desktop.core.analyses.model_diff.cache import KINDS
from nemo_desktop.core.store import ResultsStore

HANG_AT = 7  # explainer calls: 1 summarization, 2 initial summaries, then 3 per iteration: this is in t = 2
TESTS = Path(__file__).resolve().parents[3]


def _requests(log: Path) -> collections.Counter:
    if not log.exists():
        return collections.Counter()
    return collections.Counter((r["role"], r["prompt"], r["seed"]) for r in map(json.loads, log.read_text().splitlines()))


def _keys(store: ResultsStore) -> dict[str, set[str]]:
    return {kind: {r.key for r in store.find(kind=kind)} for kind in KINDS}


def test_killed_run_resumes_to_the_uninterrupted_result_without_repeating_work(tmp_path):
    # The uninterrupted reference run.
    ref_log = tmp_path / "reference.jsonl"
    with ResultsStore.open(db_path=tmp_path / "reference.db") as ref_store:
        reference = build_pipeline(ref_store, ref_log)()
        reference_keys = _keys(ref_store)

    # A child process runs the same analysis and is killed (SIGKILL) while an explainer request is in flight.
    db, log = tmp_path / "killed.db", tmp_path / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "fixtures_tiny.model_diff_resume", str(db), str(log),
                             str(HANG_AT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if line.strip() != "HANGING":
        proc.kill()
        pytest.fail(f"the child did not reach the hanging call: {line!r} {proc.stderr.read()[-2000:]}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = _requests(log)
    assert sum(n for (role, _, _), n in before.items() if role == "explainer") == HANG_AT - 1

    with ResultsStore.open(db_path=db) as store:
        stored_before = _keys(store)
        assert not stored_before["model-diff-result"] and stored_before["model-diff-iteration"]
        resume_log = tmp_path / "resumed.jsonl"
        resumed = build_pipeline(store, resume_log)()
        after = _keys(store)

    # Same result as the uninterrupted run.
    assert resumed.result_key == reference.result_key
    strip = ("timings", "notes")
    a = {k: v for k, v in resumed.to_dict().items() if k not in strip}
    b = {k: v for k, v in reference.to_dict().items() if k not in strip}
    for d in (a, b):
        d["manifest"] = {k: v for k, v in d["manifest"].items() if k not in ("created", "calls")}
        for it in d["iterations"]:
            it["seconds"] = 0.0
    assert a == b
    # Nothing lost, nothing duplicated: the same stored units as the uninterrupted run.
    assert after == reference_keys
    assert all(stored_before[k] <= after[k] for k in KINDS)
    # No completed request was sent again; together the two processes sent exactly the reference's requests.
    again = _requests(resume_log)
    assert not set(before) & set(again), "a request completed before the kill was sent again"
    assert before + again == _requests(ref_log)
