"""Issue 43 §4: the workbench's Run and the drop dialog's Diagnose are disabled, with the reason in place, while a
model the method needs is not chosen or not on disk (before: enabled, then failing in a message box); they are
enabled again when the model is there."""
from __future__ import annotations

import pytest

from test_diagnosis_drop import _dialog, drop_files


@pytest.fixture
def no_downloads(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing downloaded
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_the_workbench_says_which_model_is_missing_before_run(qtbot, digits_window, blue_three, no_downloads):
    from digits_world import ScriptedDigitsMLLM

    from nemo_desktop.core.app.samples import Sample

    window = digits_window
    window.session.unload("mllm")  # the default multimodal LLM is not downloaded
    window.show()
    qtbot.waitExposed(window)
    workbench = window.show_pane("workbench")
    workbench.ensure_shown_once()
    qtbot.waitUntil(lambda: bool(workbench.methods), timeout=60000)
    workbench.set_samples([Sample(str(blue_three), "three")])
    qtbot.waitUntil(lambda: workbench.run_problem_label.isVisible(), timeout=20000)
    assert not workbench.run_button.isEnabled()
    text = workbench.run_problem_label.text()
    assert "not downloaded" in text and "Model manager" in text, text

    window.session.put("mllm", "scripted-digits-mllm", ScriptedDigitsMLLM())
    window.sig_models_changed.emit()
    qtbot.waitUntil(lambda: workbench.run_button.isEnabled(), timeout=20000)
    assert not workbench.run_problem_label.isVisible()


def test_the_drop_dialog_says_which_model_is_missing_before_diagnose(qtbot, digits_window, blue_three,
                                                                    no_downloads):
    from digits_world import ScriptedDigitsMLLM

    window = digits_window
    window.session.unload("mllm")
    window.show()
    qtbot.waitExposed(window)
    drop_files(window, [blue_three])
    dialog = _dialog(qtbot, window)
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=20000)
    qtbot.keyClicks(dialog.label_edit, "three")
    qtbot.waitUntil(lambda: dialog.model_problem is not None, timeout=20000)
    assert not dialog.diagnose_button.isEnabled()
    assert "not downloaded" in dialog.label_hint.text()

    window.session.put("mllm", "scripted-digits-mllm", ScriptedDigitsMLLM())
    window.sig_models_changed.emit()
    qtbot.waitUntil(lambda: dialog.diagnose_button.isEnabled(), timeout=20000)
    dialog.reject()
