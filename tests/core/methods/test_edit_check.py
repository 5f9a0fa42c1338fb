"""Destructive edits (issue 19): every image counterfactual carries its distance from the original, whole-image
edits are flagged (never dropped), and the selection rule and flag threshold are settings in key and manifest.
Uses the digits world (real CNN, scripted MLLM double, real PIL edits) with an editor double that buries its
edit in colour noise over the whole image."""
from __future__ import annotations

import numpy as np
import pytest
from digits_world import DigitsEditor, ScriptedDigitsMLLM
from PIL import Image

from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.errors import ConfigError
from nemo_desktop.core.methods.edit_check import flag_whole_image_edits, select
from nemo_desktop.core.methods.result import Candidate
from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline


class NoisyRecolourEditor(DigitsEditor):
    """Recolours the digit red as asked, then blends 70 % colour noise into every pixel (the whole image moves)."""

    def edit(self, image, instruction, **kw):
        out = super().edit(image, instruction, **kw)
        if "red" not in instruction.lower():
            return out
        rng = np.random.default_rng(0)
        arr = 0.3 * np.asarray(out, dtype=np.float64) + 0.7 * rng.uniform(0, 255, size=(*out.size[::-1], 3))
        return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")


@pytest.fixture
def index(digits_classifier, reference_folder, store):
    return build_index(reference_folder, digits_classifier, store)


def run(classifier, store, index, editor, **cfg):
    pipe = SciTXPipeline(classifier, ScriptedDigitsMLLM(), editor, store=store, reference=index,
                         config=SciTXConfig(**{"k": 2, "m": 3, **cfg}))
    return pipe


def test_whole_image_edit_is_measured_flagged_and_recorded(digits_classifier, blue_three, store, index):
    result = run(digits_classifier, store, index, NoisyRecolourEditor())(blue_three, "three")
    noisy = [j for j, c in enumerate(result.candidates) if "red" in (c.intervention or "").lower()]
    assert len(noisy) == 1
    j = noisy[0]
    for i, c in enumerate(result.candidates):
        assert c.edit_distance is not None and c.edit_distance_metric == "1-ssim"  # no LPIPS weights here
        assert c.edit_flagged == (i == j), (i, c.edit_distance)
    assert result.candidates[j].edit_distance >= 0.6
    assert max(c.edit_distance for i, c in enumerate(result.candidates) if i != j) < 0.3  # local edits stay low
    assert result.selected_index != j  # prefer-unflagged: the flagged one is shown but not selected
    check = result.manifest["edit_check"]
    assert check["flagged"] == [j] and check["flag_threshold"] == 0.6 and check["selection"] == "prefer-unflagged"
    assert check["metric"] == "1-ssim" and len(check["distances"]) == 3
    assert result.manifest["config"]["edit_flag_threshold"] == 0.6
    # The stored record keeps the distances and the flag.
    from nemo_desktop.core.methods.result import ExplanationResult

    stored = ExplanationResult.from_dict(store.get(result.result_key).payload)
    assert stored.candidates[j].edit_flagged
    assert stored.candidates[j].edit_distance == result.candidates[j].edit_distance


def test_threshold_and_rule_are_in_the_key(digits_classifier, blue_three, store, index):
    a = run(digits_classifier, store, index, NoisyRecolourEditor())(blue_three, "three")
    b = run(digits_classifier, store, index, NoisyRecolourEditor(), edit_flag_threshold=1.0)(blue_three, "three")
    c = run(digits_classifier, store, index, NoisyRecolourEditor(), selection="cei")(blue_three, "three")
    assert len({a.result_key, b.result_key, c.result_key}) == 3
    assert not any(x.edit_flagged for x in b.candidates)  # threshold 1.0: nothing is flagged
    best_cei = max(range(3), key=lambda i: (b.candidates[i].cei is not None, b.candidates[i].cei or 0))
    assert c.selected_index == best_cei  # the paper's rule: plain argmax, flagged or not
    if c.candidates[c.selected_index].edit_flagged:
        assert any("changed the whole image" in n for n in c.notes)


def cand(cei, dist, metric="1-ssim"):
    return Candidate(hypothesis=f"h{cei}", cei=cei, edit_distance=dist, edit_distance_metric=metric)


def test_selection_rules():
    cands = [cand(10.0, 0.1), cand(94.9, 0.97), cand(5.0, None)]
    notes: list[str] = []
    assert select(cands, "prefer-unflagged", 0.6, notes, "hypothesis") == 0
    assert [c.edit_flagged for c in cands] == [False, True, False]
    assert "#2 had the largest CEI (+94.9)" in notes[0] and "1-ssim 0.97" in notes[0]
    notes.clear()
    assert select(cands, "cei", 0.6, notes, "hypothesis") == 1
    assert "changed the whole image" in notes[0]
    notes.clear()
    only_flagged = [cand(3.0, 0.8), cand(7.0, 0.9)]
    assert select(only_flagged, "prefer-unflagged", 0.6, notes, "hypothesis") == 1
    assert notes[0].startswith("Every tested hypothesis's edit changed the whole image")
    assert flag_whole_image_edits([cand(1.0, 0.5)], 0.5) == [0]  # at the threshold counts


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError):
        SciTXConfig(edit_flag_threshold=1.5)
    with pytest.raises(ConfigError):
        SciTXConfig(selection="largest")
