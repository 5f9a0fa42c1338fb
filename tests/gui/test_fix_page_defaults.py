"""Issue 43 §5: the fix page, opened on its own, starts with settings that run from what the page has (a fix
folder and the session's classifier: the plain-augmentation control for the folder's affected classes), and its
errors name the page's fields, not the command line's flags."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "analyses" / "fix"))

from fix_tiny_world import tiny_world  # noqa: E402
from test_fix_page import _write  # noqa: E402


@pytest.fixture
def fix_page(qtbot, make_window, tmp_path):
    from test_analyses_pane import _pane

    world = tiny_world(train_size=300, epochs=4, test_size=40)
    names = world.classifier.class_names
    folder = tmp_path / "fixdata"
    for split in ("train", "affected", "rest"):
        _write(folder, split, getattr(world, split), names)
    window, pane = _pane(qtbot, make_window, "fix")
    window.session.put("classifier", "fix-world-cnn", world.classifier)
    window.sig_models_changed.emit()
    pane.data_path.setText(str(folder))
    return window, pane, world


def _run(qtbot, pane):
    handle = pane.run()
    assert handle is not None, pane.run_problem()
    qtbot.waitUntil(lambda: handle.state in ("done", "failed"), timeout=180000)
    return handle


def test_the_fix_page_opened_on_its_own_runs_with_its_defaults(qtbot, fix_page):
    window, pane, world = fix_page
    assert pane.form.values()["data"] == "augment"  # not "edit", which needs a finding's edit
    for name, value in {"per_class": 5, "epochs": 1, "bootstrap": 100, "save": False}.items():
        pane.form.set_value(name, value)  # small, to keep the test short; the data settings are the page's own
    handle = _run(qtbot, pane)
    assert handle.state == "done", handle.outcome.error
    affected = [world.classifier.class_names[y] for y in sorted({int(y) for _, y in world.affected})]
    assert pane.state("fix").result is not None
    assert handle.outcome.result.config["affected_classes"] == ", ".join(affected)


def test_fix_errors_speak_the_pages_words(qtbot, fix_page, monkeypatch):
    window, pane, _world = fix_page
    errors = []
    monkeypatch.setattr(window, "show_error", lambda e, *a, **k: errors.append(e))
    pane.form.set_value("data", "edit")  # an edit fix without the edit
    handle = _run(qtbot, pane)
    assert handle.state == "failed"
    error = handle.outcome.error
    text = f"{error['message']} {error['hint']}"
    assert "--" not in text, text
    assert "“Edit that removes the cause”" in text and "“Targeted data”: augment" in text, text
