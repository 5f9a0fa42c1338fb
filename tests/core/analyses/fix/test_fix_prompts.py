"""Issue 29, zero-shot classifiers: adopting a validated prompt raises accuracy on the finding's images, the guard
catches a prompt that helps one class by hurting another, and adopted prompt sets are versioned and load back."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.analyses.fix import FixData
from nemo_desktop.core.analyses.fix.prompts import (apply_prompt_set, list_prompt_sets, load_prompt_set,
                                                    measure_prompts, prompts_after, save_prompt_set)
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.models.protocols import ModelInfo

CLASSES = ["cat", "dog"]


class RedCarpetZeroShot:
    """Zero-shot double: a prompt scores 2 when it names the animal the image shows (its corner pixel says which)
    and 3 when it says 'red' and the picture is red. Its dog prompt mentions a red carpet: red cats are taken for
    dogs (the finding); SciTX's intervention drops the carpet from the dog prompt."""

    zero_shot = True
    info = ModelInfo("test-double:red-carpet-zero-shot", "test-double", "1")

    def __init__(self) -> None:
        self.class_names = list(CLASSES)
        self._prompts = ["a photo of a cat", "a photo of a dog on a red carpet"]

    def class_prompt(self, i: int) -> str:
        return self._prompts[i]

    def set_class_prompt(self, i: int, prompt: str) -> None:
        self._prompts[i] = prompt

    def predict_proba(self, images, *, class_prompts=None):
        rows = []
        for im in images:
            a = np.asarray(im.convert("RGB"))
            animal = "dog" if a[0, 0, 1] > 128 else "cat"
            red = a[4, 4, 0] > 128
            logits = np.array([2.0 * (animal in p) + 3.0 * (red and "red" in p)
                               for p in ((class_prompts or {}).get(i, self._prompts[i]) for i in range(2))])
            e = np.exp(logits - logits.max())
            rows.append(e / e.sum())
        return np.asarray(rows)


def _image(animal: str, colour: str) -> Image.Image:
    a = np.zeros((8, 8, 3), np.uint8)
    a[..., 0 if colour == "red" else 2] = 200
    a[0, 0] = (0, 255 if animal == "dog" else 0, 0)
    return Image.fromarray(a, "RGB")


def _data() -> FixData:
    red_cats = [(_image("cat", "red"), 0)] * 30
    rest = [(_image("cat", "blue"), 0)] * 20 + [(_image("dog", "blue"), 1)] * 20 + [(_image("dog", "red"), 1)] * 20
    return FixData(CLASSES, train=red_cats[:1], affected=red_cats, rest=rest)


def test_adopting_the_validated_prompt_fixes_the_finding_without_a_regression():
    clf = RedCarpetZeroShot()
    out = measure_prompts(clf, _data(), {"dog": "a photo of a dog"}, resamples=200)
    assert out["affected"]["overall"]["before"] == 0.0 and out["affected"]["overall"]["after"] == 1.0
    assert out["affected"]["overall"]["n"] == 30 and out["rest"]["overall"]["change"] == 0.0
    assert out["guard"]["verdict"] == "keep"
    assert clf.class_prompt(1) == "a photo of a dog on a red carpet"  # measuring changes nothing


def test_the_guard_rejects_a_prompt_that_helps_one_class_by_hurting_another():
    out = measure_prompts(RedCarpetZeroShot(), _data(), {"cat": "a photo of a cat or dog on a red carpet"},
                          resamples=200)
    assert out["affected"]["overall"]["change"] == 100.0  # the red cats are fixed ...
    assert out["guard"]["verdict"] == "reject-regression"  # ... by taking the red dogs for cats
    assert out["rest"]["per_class"]["dog"]["change"] < -1


def test_prompt_sets_are_versioned_and_load_back():
    clf = RedCarpetZeroShot()
    first = save_prompt_set(clf, "no-carpet", prompts_after(clf, {"dog": "a photo of a dog"}), {"verdict": "keep"})
    second = save_prompt_set(clf, "no-carpet", prompts_after(clf, {"dog": "a dog"}))
    assert (first["version"], second["version"]) == (1, 2)
    assert [s["version"] for s in list_prompt_sets(clf.info.model_id)] == [1, 2]
    apply_prompt_set(clf, load_prompt_set(clf.info.model_id, "no-carpet", version=1))
    assert clf.class_prompt(1) == "a photo of a dog"
    assert load_prompt_set(clf.info.model_id, "no-carpet")["prompts"][1] == "a dog"
    with pytest.raises(ConfigError, match="not a class"):
        prompts_after(clf, {"horse": "a horse"})
