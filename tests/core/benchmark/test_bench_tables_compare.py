"""Tables compare like with like (issue 12 §5): every method of a table is averaged over the samples all of
them finished, what was left out is listed beneath the table with the reason, and "missing counts as 0" is an
option of the config and of `nemo bench table`. Also: the mean number of distinct scored candidates."""
from __future__ import annotations

import json

import pytest

from bench_world import base_config, doubles_loader
from nemo_desktop.cli.main import main
from nemo_desktop.core.benchmark.config import parse_config
from nemo_desktop.core.benchmark.records import DONE, FAILED
from nemo_desktop.core.benchmark.runner import BenchmarkRunner
from nemo_desktop.core.benchmark.table_data import CellStats, RunData, SampleOutcome, compare, describe
from nemo_desktop.core.benchmark.tables import build_tables, candidates_table, collect, render, table1
from nemo_desktop.core.base.errors import ConfigError


def _cell(method: str, outcomes: dict[str, SampleOutcome]) -> CellStats:
    c = CellStats("D", "C", "M", None, method)
    c.samples = outcomes
    return c


def _data(cells: list[CellStats], missing: str = "drop") -> RunData:
    run = {"run_id": "r", "config": {"methods": [c.method for c in cells]}}
    return RunData(run, {(c.dataset, c.classifier, c.mllm, c.editor, c.method): c for c in cells}, [], [], missing)


FAILED_WHY = "failed (out of memory)"
A = _cell("A", {"s1": SampleOutcome(DONE, cei=10.0, distinct_scored=3), "s2": SampleOutcome(DONE, cei=20.0),
                "s3": SampleOutcome(DONE, cei=30.0), "s4": SampleOutcome(DONE, cei=40.0)})
B = _cell("B", {"s1": SampleOutcome(DONE, cei=1.0, distinct_scored=1),
                "s2": SampleOutcome(DONE, cei=None, why_no_cei="no CEI"),
                "s3": SampleOutcome(FAILED, why_no_llm=FAILED_WHY, why_no_cei=FAILED_WHY),
                "s4": SampleOutcome("pending", why_no_llm="not finished (error)", why_no_cei="not finished (error)")})


def test_methods_are_averaged_over_the_samples_all_of_them_finished():
    c = compare("D / C", {"A": A, "B": B, "Absent": None}, "cei")
    assert (c.n, c.total) == (1, 4) and c.means == {"A": 10.0, "B": 1.0, "Absent": None}  # A alone: 25.0
    assert c.dropped == {"s2": {"B": "no CEI"}, "s3": {"B": FAILED_WHY}, "s4": {"B": "not finished (error)"}}
    lines = describe([c])
    assert lines[0] == "- D / C: compared on 1 of 4 samples; left out 3:"
    assert "  - left out: B: no CEI (1: s2)" in lines and "  - left out: B: failed (out of memory) (1: s3)" in lines


def test_missing_counts_as_zero_only_for_finished_samples():
    c = compare("D / C", {"A": A, "B": B}, "cei", missing="zero")
    assert (c.n, c.means) == (3, {"A": 20.0, "B": pytest.approx(1 / 3)})  # s4 is still pending: left out
    assert c.zeroed == {"s2": {"B": "no CEI"}, "s3": {"B": FAILED_WHY}} and list(c.dropped) == ["s4"]
    assert any("counted as 0: B: no CEI" in line for line in describe([c]))


def test_table_values_print_their_n_and_the_dropped_list():
    data = _data([A, B])
    t1b = next(t for t in table1(data) if t.id == "table1b")
    assert [(v.value, v.n) for v in dict(t1b.rows)["A"]] == [(10.0, 1)]
    md = render(data, [t1b], "md")
    assert "Compared on the samples every compared method finished with a value:" in md
    assert "left out: B: failed (out of memory) (1: s3)" in md
    as_json = json.loads(render(data, [t1b], "json"))["tables"][0]
    assert as_json["missing"] == "drop" and as_json["comparisons"][0]["n"] == 1
    zero = _data([A, B], missing="zero")
    assert [v.value for _, vals in next(t for t in table1(zero) if t.id == "table1b").rows for v in vals] == \
        [20.0, pytest.approx(1 / 3)]


def test_candidates_table_gives_the_mean_number_of_distinct_scored_candidates():
    (t,) = candidates_table(_data([A, B]))
    assert [(label, vals[0].value, vals[0].n) for label, vals in t.rows] == [("A", 3.0, 1), ("B", 1.0, 1)]
    assert "Distinct candidates scored per sample" in render(_data([A, B]), [t], "md")


def test_candidates_table_counts_replies_cut_off_at_the_token_limit():
    """Recorded per sample from the manifest's candidate_counts; results from before (no "cut_off") are left out."""
    from nemo_desktop.core.benchmark.table_data import _outcome

    def sample(cut_off):
        counts = {"candidates": 3, "distinct_scored": 3 - (cut_off or 0), **({} if cut_off is None else
                                                                            {"cut_off": cut_off})}
        return {"result": {"explanation": "x", "manifest": {"candidate_counts": counts}}, "cei": 1.0}

    c = _cell("C", {})
    c.samples = {f"s{i}": _outcome(sample(k), c) for i, k in enumerate((2, 0, 1, None))}
    assert [o.cut_off for o in c.samples.values()] == [2, 0, 1, None] and c.to_dict()["cut_off_candidates"] == 3
    tables = candidates_table(_data([A, c]))
    cut = next(t for t in tables if t.id == "cut_off")
    assert [(label, vals[0].value, vals[0].n) for label, vals in cut.rows] == [("A", None, 0), ("C", 3, 3)]
    md = render(_data([A, c]), [cut], "md")
    assert "Candidates whose reply was cut off at the token limit" in md and "| C | 3 |" in md


def test_a_run_with_a_failing_method_through_the_cli(bench_data, store, tmp_path, fixed_method, capsys):
    cfg = base_config(bench_data, datasets=[base_config(bench_data)["datasets"][2]], judges={},
                      classifiers={"ViT": "test-double:coded-imagenet"}, samples_per_dataset=3,
                      methods=[{"label": "Steady", "method": "fixed"},
                               {"label": "Picky", "method": "fixed", "options": {"bias": 4.0,
                                                                                 "fail_on": "background/"}}])
    s = BenchmarkRunner(parse_config(cfg), store, loader=doubles_loader()).run()
    assert s.statuses == {DONE: 5, FAILED: 1}
    data = collect(store, s.run_id)
    t1b = next(t for t in build_tables(data) if t.id == "table1b")
    assert [(v.value, v.n) for _, vals in t1b.rows for v in vals] == [(2.0, 2), (6.0, 2)]  # not 3 for Steady
    assert "left out: Picky: failed (The classifier predicts the true class" in render(data, [t1b], "md")

    root = str(tmp_path / "store")
    assert main(["bench", "table", s.run_id, "--store", root, "--table", "1", "--format", "json",
                 "--missing", "zero"]) == 0
    tables = json.loads(capsys.readouterr().out)["tables"]
    values = [v for t in tables if t["id"] == "table1b" for r in t["rows"] for v in r["values"]]
    assert [(v["value"], v["n"]) for v in values] == [(2.0, 3), (4.0, 3)]  # Picky: (6 + 6 + 0) / 3

    # The config's [tables] missing is a reporting option: same run id, kept in the run's record.
    zero_cfg = parse_config({**cfg, "tables": {"missing": "zero"}})
    assert zero_cfg.run_id == s.run_id and zero_cfg.tables == {"missing": "zero"}
    from nemo_desktop.core.store import ResultsStore

    other = ResultsStore.open(db_path=tmp_path / "s2" / "results.sqlite", artifacts_dir=tmp_path / "s2" / "a")
    try:
        BenchmarkRunner(zero_cfg, other, loader=doubles_loader()).run()
        assert collect(other, s.run_id).missing == "zero" and collect(other, s.run_id, "drop").missing == "drop"
    finally:
        other.close()
    with pytest.raises(ConfigError, match="missing"):
        parse_config({**cfg, "tables": {"missing": "skip"}})


def test_unjudged_counts_only_runs_with_judges():
    no_judges = _cell("A", {"s1": SampleOutcome(DONE, cei=1.0, why_no_llm="not judged (the run has no judges)")})
    judged = _cell("B", {"s1": SampleOutcome(DONE, cei=1.0, why_no_llm="no judge gave a score", judged=True)})
    assert (no_judges.unjudged, judged.unjudged) == (0, 1)


def test_flagged_table_says_how_often_the_kept_explanation_destroyed_the_image():
    from nemo_desktop.core.benchmark.table_data import _selected_flagged

    flagged = {"selected_index": 1, "candidates": [{"edit_distance": 0.1, "edit_flagged": False},
                                                   {"edit_distance": 0.97, "edit_flagged": True}]}
    assert _selected_flagged(flagged) is True
    assert _selected_flagged({**flagged, "selected_index": 0}) is False
    assert _selected_flagged({"selected_index": 0, "candidates": [{"edit_distance": None}]}) is None  # zero-shot
    assert _selected_flagged({"selected_index": None, "candidates": []}) is None
    c = _cell("SciTX", {"s1": SampleOutcome(DONE, cei=90.0, selected_flagged=True),
                        "s2": SampleOutcome(DONE, cei=5.0, selected_flagged=False),
                        "s3": SampleOutcome(DONE, cei=7.0, selected_flagged=False),
                        "s4": SampleOutcome(DONE, cei=1.0)})
    tables = candidates_table(_data([c]))
    (t,) = [t for t in tables if t.id == "flagged"]
    assert [(label, vals[0].value, vals[0].n) for label, vals in t.rows] == [("SciTX", pytest.approx(100 / 3), 3)]
    assert "changed the whole image" in render(_data([c]), [t], "md")
