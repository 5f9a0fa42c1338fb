"""Issue 28 #5 and #8: the Analyses page checks its inputs in place. An empty required field disables Run with
the reason (no job is started to fail in a crash dialog); a model the run needs is labelled required, never
optional; pickers pre-select what the session has loaded; a needed model whose weights are not on disk
disables Run with the exact download command."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.models.protocols import ModelInfo
from test_analyses_pane import _pane, class_folders, folder_count  # noqa: F401 - fixtures

EMBEDDER = "open-clip-vit-b32-laion2b"  # failure-modes' default joint space


class _Classifier:
    """Test double: a classifier that is (or is not) a joint image-text space."""

    def __init__(self, model_id: str, zero_shot: bool):
        self.info = ModelInfo(model_id, "test-double", "1")
        self.zero_shot = zero_shot
        self.class_names = ["cat", "dog"]

    def predict_proba(self, images):
        return np.full((len(images), 2), 0.5)


@pytest.fixture(autouse=True)
def empty_weights_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-empty"))  # no model's weights are on disk


def _label(pane, role: str) -> str:
    return pane.models_form.labelForField(pane._model_boxes[role]).text()


def test_an_empty_folder_disables_run_with_the_reason_and_starts_no_job(qtbot, make_window, folder_count,
                                                                      class_folders):
    window, pane = _pane(qtbot, make_window, folder_count)
    assert pane.data_path.text() == ""
    assert not pane.run_button.isEnabled()
    assert pane.run_problem_label.text() == "Choose the dataset folder (one sub-folder per class) to run on."
    assert pane.run_problem_label.isVisibleTo(pane) and pane.run_button.toolTip() == pane.run_problem_label.text()
    jobs_before = len(window.jobs.active_jobs())
    assert pane.run() is None  # (a script or shortcut calling run) checked in place too
    assert len(window.jobs.active_jobs()) == jobs_before and pane.result is None
    pane.data_path.setText(str(class_folders))
    assert pane.run_button.isEnabled() and not pane.run_problem_label.isVisibleTo(pane)
    with qtbot.waitSignal(pane.sig_result_shown, timeout=20000):
        pane.run()
    pane.data_path.setText("   ")
    assert not pane.run_button.isEnabled()


def test_failure_modes_with_a_classifier_that_is_not_a_joint_space(qtbot, make_window):
    window = make_window(model_process="in-process")
    window.session.put("classifier", "my-cnn", _Classifier("test-double:cnn", zero_shot=False))
    window, pane = _pane(qtbot, lambda **_: window, "failure-modes")
    # The loaded classifier is pre-selected (it used to be "(none)", ignoring it) ...
    assert pane._model_boxes["classifier"].currentText() == "current (my-cnn)"
    assert pane.chosen_models()["classifier"] == "my-cnn"
    # ... and the embedder it needs is required, with the model the run would load shown.
    assert _label(pane, "embedder") == "Joint image-text embedder:"
    assert pane._model_boxes["embedder"].currentText() == f"default ({EMBEDDER})"
    assert not pane.run_button.isEnabled()
    assert "no reference index in the results store yet" in pane.run_problem_label.text()
    # With an index chosen, the embedder's missing weights are what stops the run: said with the download.
    problem = pane_problem_with_index(pane)
    assert problem == (f"The joint image-text embedder {EMBEDDER} is not downloaded: download it with "
                       f"`nemo models download {EMBEDDER}` (or Download in the Model manager), or choose another.")
    # Choosing "(none)" for the classifier does not make the embedder optional either.
    box = pane._model_boxes["classifier"]
    box.setCurrentIndex(box.findData(""))
    assert pane.chosen_models()["classifier"] == "" and _label(pane, "embedder") == "Joint image-text embedder:"


def test_failure_modes_with_a_zero_shot_classifier_needs_no_embedder(qtbot, make_window):
    window = make_window(model_process="in-process")
    window.session.put("classifier", "my-clip", _Classifier("test-double:clip", zero_shot=True))
    window, pane = _pane(qtbot, lambda **_: window, "failure-modes")
    assert pane.chosen_models()["classifier"] == "my-clip"
    assert _label(pane, "embedder") == "Joint image-text embedder (optional):"
    assert pane_problem_with_index(pane) is None  # the classifier is its own joint space


def pane_problem_with_index(pane):
    from nemo_desktop.core.app.jobs.analyses import run_problem

    return run_problem(pane.page, pane.chosen_models(), "an-index-id")
