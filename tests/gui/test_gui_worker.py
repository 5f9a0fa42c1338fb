"""The window with its model jobs in the model worker process (settings: compute.model_process = "worker").

The digits world's models load in the worker by ref (families registered by tests/worker_test_jobs.py, which
every worker preloads). Checked: a diagnosis runs there and opens in the workbench; the worker SIGKILLed in
the middle of a diagnosis fails the run with its cause in words while the window stays, the model list
empties, and the next diagnosis works (the new process loads the same models again first); Cancel of a job
stuck in one native call ends within the grace period + 1 s; the Model manager's Load / Unload act on the
worker's models.
"""
from __future__ import annotations

import os
import signal
import time

import pytest
from gui_drops import simulate_drop
from PySide6.QtCore import Qt

from nemo_desktop.core.app.worker import JobSpec

pytestmark = pytest.mark.gui

GRACE_S = 2.0


@pytest.fixture
def digits_weights(digits, tmp_path_factory):
    import torch

    path = tmp_path_factory.mktemp("digits_weights") / "digits_cnn.pt"
    torch.save(digits[0].state_dict(), path)
    return path


@pytest.fixture
def worker_window(make_window, digits_weights, monkeypatch):
    """A main window in worker mode whose default models are the digits world's (a slow scripted MLLM)."""
    import worker_test_jobs  # noqa: F401 - the test families, in this process too

    from nemo_desktop.core.store.settings import load_settings, save_settings
    from nemo_desktop.core.app.worker import hosts

    monkeypatch.setattr(hosts, "WORKER_PRELOAD", ["worker_test_jobs"])
    settings = load_settings()
    settings.compute.model_process = "worker"
    settings.compute.cancel_grace_s = GRACE_S
    settings.models.classifier = f"test-digits:{digits_weights}"
    settings.models.mllm = "test-digits:slow:0.3"
    settings.models.editor = "test-digits:pil"
    save_settings(settings)
    window = make_window()
    assert window.model_host.mode == "worker" and window.session.remote is window.model_host
    return window


def _diagnose(qtbot, window, image):
    from nemo_desktop.gui.dialogs.diagnose import DiagnoseDialog

    entered, dropped, _mime = simulate_drop(window, [image])
    assert entered and dropped
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(DiagnoseDialog)), timeout=10000)
    dialog = next(d for d in window.findChildren(DiagnoseDialog) if d.isVisible())
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=60000)
    assert dialog.report.images[0].top5[0].name == "eight"
    qtbot.keyClicks(dialog.label_edit, "three")
    assert dialog.diagnose_button.isEnabled()
    qtbot.mouseClick(dialog.diagnose_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog._run is not None, timeout=10000)
    return dialog


def test_a_diagnosis_survives_the_worker_being_killed_and_the_next_one_works(qtbot, worker_window, digits,
                                                                           digits_reference, blue_three):
    from digits_world import DigitsCNNClassifier

    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.gui.widgets.error_dialog import ErrorDialog

    window = worker_window
    # The reference index, built here with the same classifier: the worker reads it from the shared store.
    build_index(digits_reference, DigitsCNNClassifier(digits[0]), window.session.store())
    window.show()
    qtbot.waitExposed(window)

    dialog = _diagnose(qtbot, window, blue_three)
    run = dialog._run
    stages = []
    run.sig_progress.connect(lambda p: stages.append(p.stage))
    # Killed once the models are loaded and the method works on the image (the slow MLLM keeps it there).
    qtbot.waitUntil(lambda: any(not s.startswith("Models") for s in stages), timeout=60000)
    assert window.session.loaded().keys() == {"classifier", "mllm", "editor"}
    worker_pid = window.model_host.pid
    assert worker_pid != os.getpid()
    models_changed = []
    window.sig_models_changed.connect(lambda: models_changed.append(True))
    os.kill(worker_pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: not run.active, timeout=20000)

    # The window is still here; the run says why it failed, in words.
    assert run.state == "failed"
    message = run.outcome.error["message"]
    assert "The model process was killed (SIGKILL)" in message or "ran out of memory" in message, message
    assert "The diagnosis failed: The model process" in dialog.status_label.text()
    qtbot.waitUntil(lambda: any(e.isVisible() for e in window.findChildren(ErrorDialog)), timeout=5000)
    # The models went with the process, and the lists say so.
    assert window.session.loaded() == {} and models_changed
    assert window.model_host.pid not in (None, worker_pid)  # a new worker is starting
    for box in window.findChildren(ErrorDialog):
        box.close()

    # The next diagnosis works: the new worker loads the models again on demand.
    assert dialog.diagnose_button.isEnabled()
    with qtbot.waitSignal(dialog.sig_explained, timeout=120000) as explained:
        qtbot.mouseClick(dialog.diagnose_button, Qt.MouseButton.LeftButton)
    outcome = explained.args[0][0]
    assert outcome.error is None and "blue ink" in outcome.result.explanation
    assert window.session.loaded().keys() == {"classifier", "mllm", "editor"}
    assert window.isVisible()


def test_cancel_of_a_job_stuck_in_native_code_ends_within_the_grace_period(qtbot, worker_window):
    window = worker_window
    handle = window.jobs.submit(JobSpec("worker_test_jobs:native_sleep", (120,)), title="Stuck load")
    qtbot.waitUntil(lambda: handle.progress is not None, timeout=60000)  # in the worker, in the native call
    first_pid = window.model_host.pid
    asked = time.monotonic()
    handle.cancel()
    qtbot.waitUntil(lambda: not handle.active, timeout=int((GRACE_S + 5) * 1000))
    assert time.monotonic() - asked <= GRACE_S + 1.0
    assert handle.state == "cancelled"
    assert "model process was restarted" in handle.outcome.error["message"]
    after = window.jobs.submit(JobSpec("worker_test_jobs:pid"), title="Next")
    qtbot.waitUntil(lambda: not after.active, timeout=60000)
    assert after.state == "done" and after.outcome.result not in (first_pid, os.getpid())


def test_model_manager_load_and_unload_act_on_the_worker(qtbot, worker_window, digits_weights):
    from digits_world import CLASS_NAMES

    window = worker_window
    manager = window.panes["model_manager"]
    ref = f"test-digits:{digits_weights}"
    handle = manager.load("classifier", ref)
    qtbot.waitUntil(lambda: not handle.active, timeout=60000)
    assert handle.state == "done", handle.outcome.error
    assert window.session.loaded() == {"classifier": ref}
    assert window.session._models == {}  # nothing was loaded in the window's process
    # What the panes need to know of it comes from the worker too.
    facts = window.session.facts("classifier")
    assert (facts["model_id"], facts["zero_shot"]) == ("test-double:digits-cnn", False)
    assert facts["class_names"] == CLASS_NAMES and facts["revision"]  # the competency column matches by them
    qtbot.waitUntil(lambda: manager.loaded_label.text().startswith("In memory"), timeout=5000)
    manager._update_buttons()
    assert manager.fit_competency_button.isEnabled()
    handle = manager.unload("classifier")
    qtbot.waitUntil(lambda: not handle.active, timeout=30000)
    assert handle.state == "done" and handle.outcome.result is True
    assert window.session.loaded() == {} and window.session.facts("classifier") is None


def test_indexing_a_dataset_runs_in_the_worker(qtbot, worker_window, digits_weights, digits_reference):
    window = worker_window
    pane = window.show_pane("dataset_browser")
    with qtbot.waitSignal(pane.sig_opened, timeout=20000):
        pane.open_path(digits_reference)
    with qtbot.waitSignal(pane.sig_opened, timeout=120000) as opened:
        handle = pane.index_dataset()
    assert handle.state == "done", handle.outcome.error
    data = opened.args[0]
    assert data.indexed and len(data) == 50
    assert window.session.loaded() == {"classifier": f"test-digits:{digits_weights}"}
    assert window.session._models == {}  # the window's process loaded nothing
