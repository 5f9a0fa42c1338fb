"""CamMLLM on the digits world: the MLLM sees the Grad-CAM overlay with the A.2 prompt; without validation
the greedy reply is the explanation (still scored with CEI), with validation the candidate with the largest
CEI wins; results and units are stored and reused; cancellation leaves a resumable store."""
from __future__ import annotations

import numpy as np
import pytest

from baseline_doubles import BaselineDigitsMLLM
from digits_world import EIGHT, HYPOTHESES, THREE, DigitsEditor
from nemo_desktop.core.base.errors import ConfigError, JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.methods.cam_mllm import CamMLLMConfig, CamMLLMPipeline
from nemo_desktop.core.methods.prompts import load_prompt
from nemo_desktop.core.registry.methods import get_method


def test_cam_mllm_reads_the_overlay_and_is_scored(digits_classifier, blue_three, store):
    mllm, editor = BaselineDigitsMLLM(), DigitsEditor()
    ctx = JobContext()
    result = get_method("cam-mllm").factory(digits_classifier, mllm, editor=editor, store=store)(blue_three, "three",
                                                                                                  ctx)
    kinds = [p["kind"] for p in ctx.partial_results]
    assert kinds[0] == "sample" and "evidence" in kinds and kinds[-1] == "candidate"
    evidence = next(p for p in ctx.partial_results if p["kind"] == "evidence")
    assert evidence["images"]["gradcam_overlay"].size == (336, 336)

    assert result.method == "cam-mllm" and result.sample.pred_index == EIGHT and result.sample.true_index == THREE
    assert len(result.candidates) == 1 and result.explanation == HYPOTHESES[0] and result.selected_index == 0
    assert result.cei is not None and result.cei < 10  # the greedy reply blames the strokes: not the cause
    # The MLLM got ONE image, the overlay (enlarged to 336 px), and the A.2 prompt with both class names.
    ask = next(i for i, c in enumerate(mllm.calls) if "Grad-CAM visualization" in c["text"])
    assert mllm.calls[ask]["text"] == load_prompt("cam_mllm").render(prediction_cls_name="eight",
                                                                     true_cls_name="three")
    (overlay,) = mllm.images[ask]
    assert overlay.size == (336, 336)
    stored = store.get(result.result_key)
    assert result.evidence == {"Grad-CAM overlay": "gradcam_overlay", "Grad-CAM heatmap": "gradcam_heatmap"}
    assert stored.load_image("gradcam_overlay").size == overlay.size
    heat = stored.load_array("gradcam_heatmap")
    assert heat.shape == (16, 16) and heat.max() == pytest.approx(1.0)  # the digits CNN's 16 px input
    meta = result.manifest["details"]["gradcam"]
    assert meta["target_index"] == EIGHT and meta["layer"] == "features.5" and meta["grid"] == [4, 4]
    # The intervention was derived from the hypothesis text alone.
    edit_prompt = next(c["text"] for c in mllm.calls if "editing prompt" in c["text"])
    assert HYPOTHESES[0] in edit_prompt and "Grad-CAM" not in edit_prompt
    assert editor.calls == ["Make the strokes thicker"]

    # Re-run: from the store, no model call.
    n_mllm, n_clf = len(mllm.calls), digits_classifier.calls
    again = get_method("cam-mllm").factory(digits_classifier, mllm, editor=editor, store=store)(blue_three, "three")
    assert again.to_dict() == result.to_dict() and len(mllm.calls) == n_mllm and digits_classifier.calls == n_clf


def test_cam_mllm_validated_picks_the_largest_cei(digits_classifier, blue_three, store):
    mllm, editor = BaselineDigitsMLLM(), DigitsEditor()
    result = get_method("cam-mllm-validated").factory(digits_classifier, mllm, editor=editor, store=store,
                                                      config=CamMLLMConfig(m=3))(blue_three, "three")
    assert result.method == "cam-mllm-validated"
    assert [c.hypothesis for c in result.candidates] == HYPOTHESES  # greedy, then seeds 1 and 2
    ceis = [c.cei for c in result.candidates]
    assert result.selected_index == int(np.argmax(ceis)) == 2 and result.cei == max(ceis) > 50
    assert result.explanation == HYPOTHESES[2]
    draws = [(c["temperature"], c["seed"]) for c in mllm.calls if "Grad-CAM visualization" in c["text"]]
    assert draws == [(0.0, None), (0.7, 1), (0.7, 2)]
    # The Grad-CAM was computed once, for the prediction, and reused by the three draws.
    assert len(store.find("gradcam")) == 1


def test_without_an_editor_the_explanation_is_not_scored(digits_classifier, blue_three, store):
    result = CamMLLMPipeline(digits_classifier, BaselineDigitsMLLM(), store=store)(blue_three, "three")
    assert result.explanation == HYPOTHESES[0] and result.cei is None
    assert result.candidates[0].intervention is None
    assert any("not scored" in n and "editor" in n for n in result.notes)
    with pytest.raises(ConfigError, match="no image editor"):
        get_method("cam-mllm-validated").factory(digits_classifier, BaselineDigitsMLLM(), store=store)(blue_three,
                                                                                                      "three")


def test_a_correct_prediction_is_refused(digits_classifier, blue_three):
    from nemo_desktop.core.base.errors import NemoError

    with pytest.raises(NemoError, match="no error to explain"):
        CamMLLMPipeline(digits_classifier, BaselineDigitsMLLM())(blue_three, "eight")


def test_cancelled_run_resumes_from_stored_units(digits_classifier, blue_three, store):
    token = CancelToken()

    def on_progress(p):
        if p.stage.startswith("Editing image 2"):
            token.cancel()

    mllm, editor = BaselineDigitsMLLM(), DigitsEditor()
    pipe = get_method("cam-mllm-validated").factory(digits_classifier, mllm, editor=editor, store=store)
    with pytest.raises(JobCancelled):
        pipe(blue_three, "three", JobContext(on_progress, cancel=token))
    assert not store.find("explanation")  # nothing half-written: no result, only whole units
    done_units = {r.kind for r in store.find()}
    assert {"gradcam", "hypothesis", "intervention", "edit"} <= done_units
    hypothesis_calls = sum("Grad-CAM visualization" in c["text"] for c in mllm.calls)
    edits_before = len(editor.calls)

    result = pipe(blue_three, "three")
    assert result.selected_index == 2 and result.manifest["complete"]
    assert sum("Grad-CAM visualization" in c["text"] for c in mllm.calls) == hypothesis_calls  # reused
    # The first edit was stored before the cancel; the interrupted one and the last one run now.
    assert editor.calls[edits_before:] == ["Rotate the digit slightly", "Recolour the digit red"]
