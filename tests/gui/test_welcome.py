"""Issue 28 §6: a first launch (no models, no datasets) opens on a welcome page with the checklist and "Try the
demo" as the main action; after the demo it names the next step and which MLLM and editor a real diagnosis needs.
§7: the Model manager refreshes after the demo."""
from __future__ import annotations

import pytest

from demo_cache import install_built_demo  # noqa: F401 - the built demo, shared with the first-run tests


def test_a_first_launch_opens_on_the_welcome_page(qtbot, make_window, tmp_path):
    from nemo_desktop.gui import app

    _, window = app.build(["--home", str(tmp_path / "home")])
    try:
        window.show()
        qtbot.waitExposed(window)
        assert window.showing_welcome()
        welcome = window.first_run.welcome
        assert welcome.isVisible() and not window.tabs.isVisible()
        assert welcome.demo_button.isVisible() and welcome.demo_button.isDefault()
        # The main action comes first: above every other button of the page, and the checklist is there.
        assert welcome.demo_button.mapTo(welcome, welcome.demo_button.rect().topLeft()).y() <= \
            welcome.open_button.mapTo(welcome, welcome.open_button.rect().topLeft()).y()
        assert [k for k in welcome.guide.marks] == ["classifier", "dataset", "sample", "diagnose"]
        assert all(m.isVisible() for m in welcome.guide.marks.values())
        welcome.continue_button.click()
        assert not window.showing_welcome() and window.tabs.isVisible()
        window.save_layout()
    finally:
        window.jobs.shutdown(5000)
        window.close()
    # The next launch is not a first one: it opens on the panes.
    _, again = app.build(["--home", str(tmp_path / "home")])
    try:
        assert not again.showing_welcome()
    finally:
        again.jobs.shutdown(5000)
        again.close()


def test_after_the_demo_the_next_step_and_the_models_a_diagnosis_needs_are_named(qtbot, make_window):
    """And the Model manager lists the demo's classifier without a Refresh (§7)."""
    from nemo_desktop.core.demo import CLASSIFIER_ID

    window = make_window(welcome=True)
    install_built_demo(window.paths)
    window.show()
    qtbot.waitExposed(window)
    assert window.showing_welcome()
    manager = window.panes["model_manager"]
    manager.ensure_shown_once()  # the catalog was listed before the demo (as when the user looked at it first)
    qtbot.waitUntil(lambda: bool(manager.model.rows), timeout=60000)
    before = manager.status_label.text()
    fr = window.first_run
    with qtbot.waitSignal(fr.sig_demo_ready, timeout=300000):
        fr.welcome.demo_button.click()
    bar = fr.next_step
    qtbot.waitUntil(lambda: bar.isVisible(), timeout=60000)
    text = bar.text.text()
    mllm, editor = window.session.default_ref("mllm"), window.session.default_ref("editor")
    assert "Next step" in text and "Misclassified" in text
    assert "multimodal LLM" in text and mllm in text and "image editor" in text and editor in text
    assert ("not downloaded" in text and "Model manager" in text) or "on this computer" in text
    assert fr.welcome.next_step.text() == text  # the welcome page (View ▸ Welcome) says it too
    assert window.current_pane() is window.panes["dataset_browser"] and not window.showing_welcome()
    # §7: the Model manager was read again: the demo classifier is listed as on this computer.
    qtbot.waitUntil(lambda: manager.model.row_of(CLASSIFIER_ID) >= 0 and
                    manager.model.rows[manager.model.row_of(CLASSIFIER_ID)].status in ("downloaded", "local"),
                    timeout=60000)
    assert manager.status_label.text() != before
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=300000)


def test_a_load_waiting_behind_another_job_says_queued_then_loading(qtbot, make_window):
    import threading

    from nemo_desktop.core.demo import CLASSIFIER_ID
    from nemo_desktop.gui.jobs import GPU

    window = make_window()
    setup = install_built_demo(window.paths)
    window.show()
    qtbot.waitExposed(window)
    manager = window.show_pane("model_manager")
    with qtbot.waitSignal(window.first_run.sig_demo_ready, timeout=300000):
        window.first_run.try_demo()  # registers the demo classifier (reused: no training)
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=300000)
    window.jobs.submit(lambda ctx: window.session.unload("classifier"), title="unload", lane=GPU)
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=60000)
    manager.refresh()
    qtbot.waitUntil(lambda: manager.model.row_of(CLASSIFIER_ID) >= 0 and not window.jobs.busy, timeout=60000)
    gate, started = threading.Event(), threading.Event()

    def blocker(ctx):
        started.set()
        gate.wait(30)

    window.jobs.submit(blocker, title="Another GPU job", lane=GPU)
    qtbot.waitUntil(started.is_set, timeout=20000)
    handle = manager.load("classifier", CLASSIFIER_ID)
    row = manager.model.rows[manager.model.row_of(CLASSIFIER_ID)]
    assert manager.model.status_text(row) == "queued"
    manager.select(CLASSIFIER_ID)
    assert not manager.load_button.isEnabled()
    seen = []
    handle.sig_started.connect(lambda: seen.append(manager.model.status_text(row)))
    gate.set()
    qtbot.waitUntil(lambda: handle.state == "done", timeout=120000)
    assert seen == ["loading…"]
    qtbot.waitUntil(lambda: manager.model.status_text(row) == "loaded", timeout=20000)
    assert setup  # the demo's build was installed
