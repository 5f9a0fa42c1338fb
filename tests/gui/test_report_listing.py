"""Issue 28 §9: the Report exporter lists diagnoses, analysis results and batch runs, never says "No stored results
yet" while it lists some, and exports an analysis result; a finished batch is a run that the "Run CEI" tab
shows (the newest run is shown when it appeared since the last listing)."""
from __future__ import annotations

from test_analyses_pane import folder_count  # noqa: F401 - the registered test-double analysis

from nemo_desktop.core.base.records import Candidate, ExplanationResult, SampleInfo


def _diagnosis(store, i: int, cei: float | None) -> ExplanationResult:
    sample = SampleInfo(f"/data/three/img{i}.png", f"{i:064x}", 3, "three", 8, "eight", 0.1, 0.8)
    r = ExplanationResult("scitx", sample, explanation="blue ink" if cei is not None else None,
                          selected_index=0 if cei is not None else None, cei=cei,
                          candidates=[Candidate("blue ink", cei=cei, error=None if cei is not None else "unreadable")])
    r.result_key = f"{i:064x}"
    store.put(r.result_key, "explanation", r.to_dict())
    return r


def _batch(store):
    """A batch of three images as the workbench runs it (run_job._explain_each), with a method double."""
    from nemo_desktop.core.base.job_context import JobContext
    from nemo_desktop.core.app.jobs.models import _end_batch_run, _explain_each, _start_batch_run
    from nemo_desktop.core.app.samples import Sample

    results = {f"/data/three/img{i}.png": _diagnosis(store, i, cei) for i, cei in ((1, 12.0), (2, -4.0), (3, None))}

    class Method:
        def __call__(self, path, true_label, ctx):
            return results[path]

    class Classifier:
        class info:
            model_id = "digits-cnn"

    samples = [Sample(p, "three", "eight", 0.8) for p in results]
    run_id = _start_batch_run(store, "scitx", Classifier(), len(samples))
    outcomes = []
    _explain_each(Method(), samples, outcomes, run_id, store, JobContext())
    _end_batch_run(store, run_id, "done")
    return run_id


def test_the_exporter_lists_diagnoses_analysis_results_and_batch_runs(qtbot, make_window, folder_count,  # noqa: F811
                                                                      tmp_path):
    window = make_window()
    store = window.session.store()
    pane = window.show_pane("report_exporter")
    handle = pane.refresh()
    qtbot.waitUntil(lambda: handle.state == "done", timeout=20000)
    assert pane.table.rowCount() == 0 and pane.status_label.text().startswith("No stored results yet")

    run_id = _batch(store)
    assert store.get_run(run_id)["kind"] == "batch" and store.get_run(run_id)["status"] == "done"
    assert [it["status"] for it in store.run_items(run_id)] == ["explained", "no cause found",
                                                                "nothing could be tested"]
    store.put("a" * 64, "folder-count", {"kind": "dataset", "analysis": folder_count, "counts": {"cat": 3}})
    handle = pane.refresh()
    qtbot.waitUntil(lambda: handle.state == "done", timeout=20000)
    whats = [pane.table.item(r, 0).text() for r in range(pane.table.rowCount())]
    assert "Run: batch diagnosis" in whats and f"Analysis: {folder_count}" in whats
    assert sum(w.startswith("Diagnosis: ") for w in whats) == 3
    assert "No stored results" not in pane.status_label.text()
    assert pane.status_label.text() == ("Stored: 3 diagnoses, 1 analysis result, 1 run (batches and benchmarks).")
    run_row = whats.index("Run: batch diagnosis")
    assert "1 explained" in pane.table.item(run_row, 2).text() and "1 nothing could be tested" in \
        pane.table.item(run_row, 2).text()

    # The analysis result exports as its own report.
    analysis = next(it for it in pane.items if it.kind == "analysis")
    out = tmp_path / "analysis.html"
    job = pane.export([analysis], out)
    qtbot.waitUntil(lambda: job.state in ("done", "failed"), timeout=30000)
    assert job.state == "done" and "cat: 3 images" in out.read_text()
    run = next(it for it in pane.items if it.kind == "run")
    out = tmp_path / "batch.html"
    job = pane.export([run], out)
    qtbot.waitUntil(lambda: job.state in ("done", "failed"), timeout=30000)
    assert job.state == "done" and run_id in out.read_text()


def test_the_cei_of_a_run_tab_shows_a_batch_finished_since_it_was_opened(qtbot, make_window):
    window = make_window()
    store = window.session.store()
    first = _batch(store)
    browser = window.show_pane("dataset_browser")
    tabs = browser.analytics
    cei_tab = next(i for i in range(tabs.count()) if tabs.tabText(i) == "Run CEI")
    view = browser.analytics.run_cei
    tabs.setCurrentIndex(cei_tab)
    qtbot.waitUntil(lambda: view.shown is not None and view.shown.run_id == first, timeout=20000)
    assert view.shown.n == 2 and view.shown.without_cei == 1

    tabs.setCurrentIndex(0)
    second = _batch(store)  # a batch finished while another tab was open
    tabs.setCurrentIndex(cei_tab)  # no Refresh pressed
    qtbot.waitUntil(lambda: view.shown is not None and view.shown.run_id == second, timeout=20000)
    assert view.run_combo.count() == 2
