"""Each command's result -> exit code (cli/exit_codes.py): no explanation is a failure, partial results are
partial. End to end: test_scitx_e2e (every endpoint request fails -> 3), test_predict (unreadable files -> 1)."""
from __future__ import annotations

from nemo_desktop.cli.commands import bench, explain
from nemo_desktop.cli.exit_codes import PARTIAL, RUNTIME, SUCCESS
from nemo_desktop.core.benchmark.records import DONE, EXPLAINED, FAILED
from nemo_desktop.core.benchmark.work_units import RunSummary
from nemo_desktop.core.methods.pipeline_steps import INCOMPLETE_NOTE
from nemo_desktop.core.base.records import Candidate, ExplanationResult, SampleInfo

SAMPLE = SampleInfo("x.png", "abc", 0, "cat", 1, "dog", 0.1, 0.9, [])


def _result(explanation, errors, notes=()):
    cands = [Candidate(f"h{i}", "image", "edit", error=e) for i, e in enumerate(errors)]
    return ExplanationResult("scitx", SAMPLE, explanation=explanation, selected_index=0 if explanation else None,
                             candidates=cands, notes=list(notes))


def test_explain_exit_codes():
    assert explain.exit_code(_result("The snow.", [None, None])) == SUCCESS
    assert explain.exit_code(_result("The snow.", [None, "HTTP 500"])) == PARTIAL
    assert explain.exit_code(_result("The snow.", [None], [INCOMPLETE_NOTE])) == PARTIAL
    assert explain.exit_code(_result(None, ["HTTP 400", "HTTP 400"])) == RUNTIME  # nothing explained
    assert explain.exit_code(_result(None, [])) == RUNTIME


def test_bench_exit_codes():
    def summary(**statuses):
        return RunSummary("r", "1/1", total=sum(statuses.values()), statuses=statuses)

    assert bench.exit_code(summary(**{DONE: 3})) == SUCCESS
    assert bench.exit_code(summary(**{DONE: 2, FAILED: 1})) == PARTIAL
    assert bench.exit_code(summary(**{DONE: 1, EXPLAINED: 1})) == PARTIAL  # judged only in part
    assert bench.exit_code(summary(**{FAILED: 3})) == RUNTIME  # every item failed: not a success
    assert bench.exit_code(summary()) == SUCCESS  # an empty shard has nothing to fail
