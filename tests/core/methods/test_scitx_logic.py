"""SciTX on a world with a real spurious cue: it must pick the causal hypothesis, with a positive CEI.

The CNN is trained in the test session on real handwritten digits where ink colour is a shortcut (all
training threes are red, all eights blue); the query is a held-out three drawn in blue, which the CNN
takes for an eight. The MLLM test double proposes one causal hypothesis (the blue ink) and two that are not
(stroke thickness, rotation); the editor test double performs each edit for real. Only the recolouring
moves the CNN back to "three", so only CEI can tell the hypotheses apart.
"""
from __future__ import annotations

from digits_world import EIGHT, HYPOTHESES, THREE, DigitsEditor, ScriptedDigitsMLLM

from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline


def test_scitx_selects_the_causal_hypothesis(digits_classifier, blue_three, reference_folder, store):
    index = build_index(reference_folder, digits_classifier, store)
    mllm, editor = ScriptedDigitsMLLM(), DigitsEditor()
    pipe = SciTXPipeline(digits_classifier, mllm, editor, store=store, reference=index,
                         config=SciTXConfig(k=3, m=3, seed=0))

    result = pipe(blue_three, "three")

    assert result.sample.true_index == THREE and result.sample.pred_index == EIGHT
    assert [c.hypothesis for c in result.candidates] == HYPOTHESES  # greedy, then seeds 1 and 2
    assert all(c.error is None for c in result.candidates), [c.error for c in result.candidates]
    causal = result.candidates[2]
    assert causal.intervention == "Recolour the digit red"
    assert result.selected_index == 2
    assert result.explanation == HYPOTHESES[2]
    assert result.cei == causal.cei and causal.cei > 50  # the true-class probability jumps
    assert causal.top5_after[0].name == "three" and causal.top5_before[0].name == "eight"
    for other in result.candidates[:2]:
        assert other.cei < 10, (other.hypothesis, other.cei)
    assert causal.prob_true_after > causal.prob_true_before

    # The survey saw the real contrast: Set A (threes) captioned red, Set B (eights) blue.
    captions = {o.set_name: [] for o in result.observations}
    for o in result.observations:
        captions[o.set_name].append(o.caption)
    assert captions["A"] and all("red ink" in c for c in captions["A"])
    assert captions["B"] and all("blue ink" in c for c in captions["B"])
    assert all(o.label_name == "three" for o in result.observations if o.set_name == "A")
    hypothesis_prompt = next(c["text"] for c in mllm.calls if "cause_of_error" in c["text"])
    assert "red ink" in hypothesis_prompt and "blue ink" in hypothesis_prompt
    # The edit-instruction prompt is derived from the hypothesis alone: no captions, no image.
    edit_prompts = [c["text"] for c in mllm.calls if "editing prompt" in c["text"]]
    assert len(edit_prompts) == 3 and not any("Set A" in t for t in edit_prompts)
    assert editor.calls[:3] == ["Make the strokes thicker", "Rotate the digit slightly", "Recolour the digit red"]
    # the reference control (issue 45): the selected edit again on six references of other classes
    assert editor.calls[3:] == ["Recolour the digit red"] * 6
