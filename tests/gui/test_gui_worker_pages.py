"""The app's pages with their model jobs in the model worker process (compute.model_process = "worker", the default).

Each test's window has its own worker (a restart of the app is a new one); inside a test the worker is shared by
every page. The models are built here and handed to the worker (`worker_test_jobs.put_models` pickles them into
its session) or loaded there by ref, as a user's are; the window's own process never holds one. Checked: the
Analyses page runs competency-cf there (score and the MLLM's explanation shown, the result in the shared store),
the dataset browser's competency column is scored and read back there, a failure-modes result's sentence ranks
the browser's images and is validated with CEI there (the check joins the window's copy of the result), and the
offline demo prepares, loads and indexes there, after which a new window restores its classifier into its own
new worker.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from gui_failure_modes import show_failure_modes_result
from test_competency_gui import comp_world  # noqa: F401 - fixture

from nemo_desktop.core.app.worker import JobSpec

pytestmark = pytest.mark.gui


@pytest.fixture
def worker_mode(monkeypatch):
    """Worker mode, with the test model families (tests/worker_test_jobs.py) known to every worker."""
    import worker_test_jobs  # noqa: F401

    from nemo_desktop.core.app.worker import hosts

    monkeypatch.setattr(hosts, "WORKER_PRELOAD", ["worker_test_jobs"])
    return "worker"


def _worker_window(qtbot, make_window, worker_mode):
    window = make_window(model_process=worker_mode)
    assert window.model_host.mode == "worker" and window.session.remote is window.model_host
    window.show()
    qtbot.waitExposed(window)
    return window


def _put_in_worker(qtbot, window, models: dict) -> None:
    """{kind: (ref, model)} into the worker's session (pickled there), as the Model manager's Load leaves them."""
    handle = window.jobs.submit(JobSpec("worker_test_jobs:put_models", (models,)), title="Models for the test")
    qtbot.waitUntil(lambda: not handle.active, timeout=120000)
    assert handle.state == "done", handle.outcome.error
    qtbot.waitUntil(lambda: window.session.loaded().keys() >= models.keys(), timeout=5000)
    assert window.session._models == {}  # nothing in the window's process
    assert window.model_host.pid not in (None, os.getpid())


def test_competency_score_and_explanation_run_in_the_worker(qtbot, make_window, worker_mode, comp_world, tmp_path):
    from fixtures_tiny.competency_world import TINY, RecordingMLLM, write_class_folders

    from nemo_desktop.core.registry import Components, build_analysis

    window = _worker_window(qtbot, make_window, worker_mode)
    # An estimator fitted here, stored in the store the worker shares (its key is what the pages offer).
    fit = build_analysis("competency-estimator", Components(classifier=comp_world.classifier,
                                                            store=window.session.store()), {**TINY, "epochs": 2})
    fitted = fit(write_class_folders(tmp_path / "fit", comp_world.fit_images, comp_world.fit_labels, 30))
    _put_in_worker(qtbot, window, {"classifier": ("digits-competency", comp_world.classifier),
                                   "mllm": ("recording-mllm", RecordingMLLM())})

    # The Analyses page: competency-cf on one image, with the MLLM's explanation.
    pane = window.show_pane("analyses")
    pane.ensure_shown_once()
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    pane.select_analysis("competency-cf")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "competency-cf", timeout=60000)
    assert pane._model_boxes["fitted"].currentData() == fitted.key
    nine = tmp_path / "nine.png"
    comp_world.nines[0].save(nine)
    pane.data_path.setText(str(nine))
    pane.form.set_value("methods", ("reco",))
    pane.form.set_value("explain", True)
    pane.form.set_value("explain_methods", ("reco",))
    assert pane.run_problem() is None, pane.run_problem()
    stages = []
    with qtbot.waitSignal(pane.sig_result_shown, timeout=180000):
        handle = pane.run()
        handle.sig_progress.connect(lambda p: stages.append(p.stage))
    assert handle.state == "done", handle.outcome.error
    assert stages, "no progress arrived from the worker"
    result = pane.result
    assert result.analysis == "competency-cf" and [o.method for o in result.counterfactuals] == ["reco"]
    # The MLLM that answered is the worker's copy: its words came back with the result, and are shown.
    assert result.explanation_without and "the strokes look unusual" in result.explanation_without
    assert "the strokes look unusual" in (result.counterfactuals[0].explanation or "")
    text = pane.result_view.toPlainText()
    assert "Reco" in text and f"{result.original.competency:.3f}"[:4] in text and "strokes look unusual" in text
    stored = window.session.store().get(result.key)  # written by the worker, read by the window
    assert stored is not None

    # The dataset browser's competency column: the estimator offered from the worker's classifier, scored there.
    folder = write_class_folders(tmp_path / "data", comp_world.fit_images, comp_world.fit_labels, 3)
    browser = window.show_pane("dataset_browser")
    with qtbot.waitSignal(browser.sig_opened, timeout=20000):
        browser.open_path(folder)
    controls = browser.competency
    qtbot.waitUntil(lambda: controls.estimator_key == fitted.key, timeout=20000)
    handle = controls.score()
    # Waited on the job, not on the column signal: a stored-column lookup queued before may emit it first.
    qtbot.waitUntil(lambda: not handle.active, timeout=120000)
    assert handle.state == "done", handle.outcome.error
    data = browser.data
    assert controls.column.n == len(data) == 27 and not np.isnan(data.competency).any()
    scored = dict(zip(map(str, data.paths), data.competency))
    # Opened again: the stored column is read back through the worker (the estimator is bound to its classifier).
    other = write_class_folders(tmp_path / "other", comp_world.test_images, comp_world.test_labels, 1)
    with qtbot.waitSignal(browser.sig_opened, timeout=20000):
        browser.open_path(other)
    assert browser.data.competency is None
    with qtbot.waitSignal(browser.sig_opened, timeout=20000):
        browser.open_path(folder)
    qtbot.waitUntil(lambda: browser.data.competency is not None, timeout=60000)
    assert np.allclose(browser.data.competency, [scored[str(p)] for p in browser.data.paths], atol=1e-6)
    assert window.session._models == {}


@pytest.fixture
def fm_result(digits, tmp_path):
    """A real failure-modes result on the digits CNN's index of held-out digits in random inks (as
    tests/gui/test_failure_mode_actions.py), computed here into the test's store."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "analyses" / "failure_modes"))
    from digits_world import DigitsCNNClassifier
    from fm_digits_world import MeasuredFactorSpace, sentence_file, write_ink_manifest

    from nemo_desktop.core.analyses.failure_modes import FailureModesConfig, FailureModesPipeline
    from nemo_desktop.core.data.datasets import CsvManifestDataset
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    (tmp_path / "ink").mkdir()
    manifest = write_ink_manifest(tmp_path / "ink", digits)
    store, clf = ResultsStore.open(get_paths()), DigitsCNNClassifier(digits[0])
    try:
        index = build_index(CsvManifestDataset(manifest), clf, store)
        cfg = FailureModesConfig(clusters=3, tau=None, split="correctness",
                                 sentence_sets=(str(sentence_file(tmp_path / "s.json")),))
        result = FailureModesPipeline(clf, MeasuredFactorSpace(*digits[2]), store, cfg)(index)
    finally:
        store.close()
    return result, index


def test_failure_modes_rank_and_validate_in_the_worker(qtbot, make_window, worker_mode, digits, fm_result,
                                                       tmp_path):
    from digits_world import DigitsCNNClassifier, DigitsEditor
    from fm_digits_world import EditWriterMLLM, MeasuredFactorSpace

    from nemo_desktop.core.analyses.failure_modes.by_sentence import rank_index
    from nemo_desktop.core.analyses.failure_modes.members import list_modes

    import torch

    result, index = fm_result
    weights = tmp_path / "digits_cnn.pt"
    torch.save(digits[0].state_dict(), weights)
    window = _worker_window(qtbot, make_window, worker_mode)
    # The CNN (a class made inside a function: not picklable) is loaded there by ref, as a user's model is.
    handle = window.jobs.submit(JobSpec("nemo_desktop.core.app.jobs.models:load_model",
                                        ("classifier", f"test-digits:{weights}")), title="Loading the classifier")
    qtbot.waitUntil(lambda: not handle.active, timeout=120000)
    assert handle.state == "done", handle.outcome.error
    _put_in_worker(qtbot, window, {"mllm": ("edit-writer", EditWriterMLLM()), "editor": ("digits-editor", DigitsEditor()),
                                   "embedder": ("measured-factors", MeasuredFactorSpace(*digits[2]))})
    assert window.session.facts("classifier")["model_id"] == DigitsCNNClassifier(digits[0]).info.model_id
    pane = show_failure_modes_result(qtbot, window, result)
    actions = pane.failure_modes
    modes = list_modes(result)

    # Ranking by a mode's sentence: embedded by the worker's joint space, shown in the window's browser.
    position = max(range(len(modes)), key=lambda i: len(modes[i].paths) * modes[i].holds)
    actions.select(position)
    with qtbot.waitSignal(actions.sig_ranked, timeout=60000) as ranked:
        actions.rank_button.click()
    core = rank_index(index, modes[position].best, embedder=MeasuredFactorSpace(*digits[2]),
                      store=window.session.store())
    browser = window.panes["dataset_browser"]
    assert list(ranked.args[0].paths) == list(core.paths)
    assert [str(browser.data.paths[r]) for r in browser.grid_model.rows] == list(core.paths)

    # The blue-ink shortcut validated with CEI in the worker; the check joins the result the window shows.
    def blue_size(m):
        said = {p["text"] for ps in result.groups[m.group].hard_clusters[m.cluster].sentences.values() for p in ps}
        return ("a digit drawn in blue ink" in said) * m.holds * len(m.paths)

    actions.select(max(range(len(modes)), key=lambda i: blue_size(modes[i])))
    actions.sentence_edit.setText("a digit drawn in blue ink")
    checks = []
    actions.sig_validated.connect(checks.append)
    with qtbot.waitSignals([actions.sig_validated, pane.sig_result_rerendered], timeout=180000):
        actions.cei_button.click()
    blue = checks[0]
    assert blue.held_up is True and blue.n > 0 and f"n = {blue.n} of {blue.tested}" in actions.cei_label.text()
    assert [v["sentence"] for v in (result.cei_validation or {}).get("validations", [])] == \
        ["a digit drawn in blue ink"]
    assert "CEI validation of the sentences" in pane.result_view.toPlainText()
    assert window.session._models == {}


def test_the_demo_runs_in_the_worker_and_the_next_start_restores_its_classifier(qtbot, make_window, worker_mode):
    """`Try the demo` as the app runs it (the demo built once per test process is copied in first, so nothing is
    trained here); then a new window (a new worker) restores the classifier from disk."""
    from demo_cache import install_built_demo

    from nemo_desktop.core.demo import digits as demo
    from nemo_desktop.core.store.paths import get_paths
    from nemo_desktop.gui.first_run import memory

    install_built_demo(get_paths())
    window = _worker_window(qtbot, make_window, worker_mode)
    fr = window.first_run
    browser = window.panes["dataset_browser"]
    with qtbot.waitSignal(fr.sig_demo_ready, timeout=300000) as ready:
        fr.dataset_guide.demo_button.click()
    setup = ready.args[0]
    assert setup.reused_classifier and setup.reused_dataset
    assert window.session.loaded() == {"classifier": demo.CLASSIFIER_ID} and window.session._models == {}
    assert window.session.facts("classifier")["model_id"] == demo.CLASSIFIER_ID
    qtbot.waitUntil(lambda: browser.data is not None and browser.data.indexed, timeout=300000)  # in the worker
    assert len(browser.data) == 360 and float(browser.data.correct.mean()) > 0.8
    assert "Demo ready" in fr.dataset_guide.demo_status.text()
    qtbot.waitUntil(lambda: memory.remembered_models(window.background_settings) == {"classifier": demo.CLASSIFIER_ID},
                    timeout=10000)
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=180000)
    first_worker = window.model_host.pid
    window.close()

    again = make_window(model_process=worker_mode)
    with qtbot.waitSignal(again.first_run.sig_restored, timeout=120000) as restored:
        again.show()
        qtbot.waitExposed(again)
    assert restored.args[0] == {"restored": [("classifier", demo.CLASSIFIER_ID)], "skipped": []}
    assert again.session.loaded() == {"classifier": demo.CLASSIFIER_ID} and again.session._models == {}
    assert again.model_host.pid not in (None, first_worker, os.getpid())
    qtbot.waitUntil(lambda: not again.jobs.busy, timeout=60000)
    assert "classifier" in again.first_run.workbench_guide.done_steps()
