"""ChangeMLLM on the digits world: the MLLM gets the misclassified image and the nearest correctly
classified reference of the true class with the A.2 two-image prompt; fallbacks and refusals; validation
picks the candidate with the largest CEI."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from baseline_doubles import BaselineDigitsMLLM
from digits_world import EIGHT, HYPOTHESES, THREE, DigitsEditor, dominant_ink, write_reference
from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.base.errors import ConfigError, NemoError
from nemo_desktop.core.methods.change_mllm import ChangeMLLMConfig, ChangeMLLMPipeline
from nemo_desktop.core.methods.prompts import load_prompt
from nemo_desktop.core.registry.methods import get_method


@pytest.fixture
def index(digits_classifier, reference_folder, store):
    return build_index(reference_folder, digits_classifier, store)


def test_change_mllm_compares_with_the_nearest_correct_true_class_reference(digits_classifier, blue_three, store,
                                                                            index):
    mllm, editor = BaselineDigitsMLLM(), DigitsEditor()
    result = get_method("change-mllm").factory(digits_classifier, mllm, editor=editor, store=store,
                                               reference=index)(blue_three, "three")
    assert result.method == "change-mllm" and result.explanation == HYPOTHESES[0] and result.cei is not None
    (obs,) = result.observations
    assert obs.label_name == "three" and obs.set_name == "A" and obs.thumbnail_artifact == "reference"
    # It is the nearest correctly classified three in the classifier's feature space.
    q = digits_classifier.embed([Image.open(blue_three).convert("RGB")])[0]
    rows = np.flatnonzero(index.entries.correct & (index.entries.labels == THREE))
    best = rows[np.argmax(np.asarray(index.features[rows]) @ q)]
    assert obs.image_path == str(index.entries.paths[best])
    # Two images in the paper's order (the misclassified one first) and the A.2 prompt.
    ask = next(i for i, c in enumerate(mllm.calls) if "The second image is" in c["text"])
    assert mllm.calls[ask]["text"] == load_prompt("change_mllm").render(
        true_cls_name="three", prediction_cls_name="eight", src_cls_name="three")
    first, second = mllm.images[ask]
    assert dominant_ink(first) == "blue" and dominant_ink(second) == "red"
    assert result.manifest["details"]["visual_differences"] == [
        "The first digit is drawn in blue ink, the second in red ink."]
    assert result.evidence == {"Reference image": "reference"}
    assert store.get(result.result_key).load_image("reference").size == second.size


def test_change_mllm_validated_picks_the_largest_cei(digits_classifier, blue_three, store, index):
    mllm, editor = BaselineDigitsMLLM(), DigitsEditor()
    result = get_method("change-mllm-validated").factory(digits_classifier, mllm, editor=editor, store=store,
                                                         reference=index,
                                                         config=ChangeMLLMConfig(m=3))(blue_three, "three")
    ceis = [c.cei for c in result.candidates]
    assert [c.hypothesis for c in result.candidates] == HYPOTHESES
    assert result.selected_index == int(np.argmax(ceis)) == 2 and result.explanation == HYPOTHESES[2]
    assert result.cei > 50 and result.method == "change-mllm-validated"
    assert len(result.manifest["details"]["visual_differences"]) == 3


def test_falls_back_to_the_predicted_class_then_refuses(digits, digits_classifier, blue_three, store, tmp_path):
    no_threes = build_index(write_reference(tmp_path / "no-threes", digits, skip_classes=(THREE,)), digits_classifier,
                            store)
    mllm = BaselineDigitsMLLM()
    result = ChangeMLLMPipeline(digits_classifier, mllm, store=store, reference=no_threes)(blue_three, "three")
    assert result.observations[0].label_name == "eight"
    assert any("reference is of the predicted class 'eight'" in n for n in result.notes)
    ask = next(c["text"] for c in mllm.calls if "The second image is" in c["text"])
    assert "The second image is eight, and the model predicted it correctly." in ask

    neither = build_index(write_reference(tmp_path / "neither", digits, skip_classes=(THREE, EIGHT)),
                          digits_classifier, store)
    with pytest.raises(NemoError, match="no correctly classified image"):
        ChangeMLLMPipeline(digits_classifier, mllm, store=store, reference=neither)(blue_three, "three")
    with pytest.raises(ConfigError, match="no reference index"):
        ChangeMLLMPipeline(digits_classifier, mllm, store=store)(blue_three, "three")


def test_an_index_of_another_classifier_is_refused(digits_classifier, blue_three, store, index):
    from dataclasses import replace

    other = type(digits_classifier)(digits_classifier.model)
    other.info = replace(other.info, revision="another-revision")
    with pytest.raises(ConfigError, match="was built with"):
        ChangeMLLMPipeline(other, BaselineDigitsMLLM(), store=store, reference=index)(blue_three, "three")
