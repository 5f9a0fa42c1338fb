"""The window after its model process died (issue 42 §1): the pickers and the status bar follow the worker.

The demo classifier is loaded by its catalog id, with the settings' classifier left unset (setting it to the
test model hid the bug: the page showed "current (demo-digits-classifier)" while the new worker had fallen back
to the default). After a kill while idle the new worker loads it again by itself, and the Analyses page and the
Model manager's list say so; a worker that keeps dying at start is shown as stopped, with its cause and a
"Start the model process again" button that brings it back.
"""
from __future__ import annotations

import os
import signal

import pytest

from nemo_desktop.core.app.worker import JobSpec

pytestmark = pytest.mark.gui


@pytest.fixture
def demo_window(qtbot, make_window):
    from demo_cache import install_built_demo

    from nemo_desktop.core.demo import CLASSIFIER_ID, prepare_demo
    from nemo_desktop.core.store.paths import get_paths

    install_built_demo(get_paths())
    prepare_demo(get_paths())  # registered in the user catalog, as `nemo demo` leaves it
    window = make_window(model_process="worker")
    window.show()
    qtbot.waitExposed(window)
    handle = window.jobs.submit(JobSpec("nemo_desktop.core.app.jobs.models:load_model", ("classifier", CLASSIFIER_ID)),
                                title="Load the demo classifier")
    qtbot.waitUntil(lambda: not handle.active, timeout=180000)
    assert handle.state == "done", handle.outcome.error
    qtbot.waitUntil(lambda: window.session.loaded() == {"classifier": CLASSIFIER_ID}, timeout=10000)
    return window, CLASSIFIER_ID


def _classifier_picker(qtbot, window):
    pane = window.show_pane("analyses")
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    pane.select_analysis("competency-bench")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "competency-bench", timeout=120000)
    return pane._model_boxes["classifier"]


def test_after_a_kill_while_idle_the_page_and_the_lists_show_the_classifier_loaded_again(qtbot, demo_window):
    window, ref = demo_window
    box = _classifier_picker(qtbot, window)
    assert box.itemText(0) == f"current ({ref})"
    seen = []
    window._models_relay.state.connect(lambda s: seen.append((s["status"], window.model_process_label.text())))
    first = window.model_host.pid
    os.kill(first, signal.SIGKILL)
    # The new process loads the same classifier by itself; meanwhile the status bar says so.
    qtbot.waitUntil(lambda: window.model_host.pid not in (None, first)
                    and window.session.loaded() == {"classifier": ref}, timeout=180000)
    qtbot.waitUntil(lambda: seen and seen[-1][0] == "running", timeout=10000)
    assert ("restoring", f"Model process restarted: loading classifier {ref} again…") in seen
    assert not window.model_process_label.isVisible() and not window.model_process_button.isVisible()
    # The page never showed the default model, and a page prepared now shows the demo classifier too.
    assert box.itemText(0) == f"current ({ref})"
    pane = window.panes["analyses"]
    pane.select_analysis("competency-cf")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "competency-cf", timeout=120000)
    assert pane._model_boxes["classifier"].itemText(0) == f"current ({ref})"


def test_a_model_process_that_keeps_dying_is_shown_stopped_and_can_be_started_again(qtbot, make_window):
    from nemo_desktop.core.app.worker import WorkerConfig

    window = make_window(model_process="worker")
    host = window.model_host
    good = host.config
    host.config = WorkerConfig(paths=good.paths, preload=("no_such_module_for_42a",))
    host.restart_limit = 2
    window.show()
    qtbot.waitExposed(window)
    host.start()
    qtbot.waitUntil(lambda: window.model_process_button.isVisible(), timeout=120000)
    label = window.model_process_label
    assert label.text() == "Model process stopped (it kept failing to start)"
    assert "No module named 'no_such_module_for_42a'" in label.toolTip()
    assert "ended 3 times in a row" in label.toolTip()
    assert window.model_process_button.text() == "Start the model process again"
    host.config = good  # the cause is fixed
    window.model_process_button.click()
    assert not window.model_process_button.isVisible()
    handle = window.jobs.submit(JobSpec("worker_test_jobs:pid"), title="pid")
    qtbot.waitUntil(lambda: not handle.active, timeout=120000)
    assert handle.state == "done" and handle.outcome.result == host.pid not in (None, os.getpid())
    assert not label.isVisible()
