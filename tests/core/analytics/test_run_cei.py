"""The CEI values of a stored run: per method, with failed, skipped and CEI-less items counted, binned as the
run report bins them."""
from __future__ import annotations

import pytest

from nemo_desktop.core.app.dataset_browser.run_cei import run_cei
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, SampleInfo
from nemo_desktop.core.reports.runs import cei_histogram
from nemo_desktop.core.store import ResultsStore


@pytest.fixture
def store(tmp_path):
    s = ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite")
    yield s
    s.close()


def _put(store, key: str, method: str, cei: float | None, label: str | None = None) -> str:
    """A stored explanation; with `label`, in the benchmark's record shape (the result nested, its label beside)."""
    sample = SampleInfo(f"/data/{key}.png", key, 0, "three", 1, "eight", 0.1, 0.9, [ClassScore(1, "eight", 0.9)])
    r = ExplanationResult(method, sample, explanation="The blue ink.", selected_index=0 if cei is not None else None,
                          cei=cei, candidates=[Candidate("The blue ink.", cei=cei)])
    store.put(key, "explanation", r.to_dict() if label is None else {"result": r.to_dict(), "method": label})
    return key


def test_run_cei_groups_values_by_method_and_counts_the_rest(store):
    run = store.create_run("batch", {"dataset": "digits"})
    for i, cei in enumerate([12.5, -3.0, 40.0]):
        store.add_run_item(run, f"s{i}", _put(store, f"a{i}", "scitx", cei), "done")
    store.add_run_item(run, "v0", _put(store, "b0", "scitx", 7.0, label="scitx+validation"), "done")
    store.add_run_item(run, "none", _put(store, "c0", "scitx", None), "done")
    store.add_run_item(run, "err", None, "error", {"type": "ModelError", "message": "The MLLM crashed."})
    store.add_run_item(run, "gone", "no-such-key", "done")
    store.add_run_item(run, "right", None, "skipped")

    r = run_cei(store, run)
    assert r.items == 8 and r.n == 4
    assert r.values == {"scitx": [12.5, -3.0, 40.0], "scitx+validation": [7.0]}
    assert (r.without_cei, r.failed, r.skipped) == (1, 2, 1)
    h = r.histogram()
    assert h == cei_histogram(r.values)  # the report's bins
    assert [s.n for s in h.series] == [3, 1] and sum(h.series[0].counts) == 3


def test_run_cei_of_an_unknown_run_is_a_clear_error(store):
    with pytest.raises(ConfigError, match="No run has the id"):
        run_cei(store, "nope")


def test_a_run_without_results_has_no_histogram(store):
    run = store.create_run("batch", {})
    store.add_run_item(run, "err", None, "error", {"message": "x"})
    r = run_cei(store, run)
    assert r.n == 0 and r.failed == 1 and r.histogram() is None
