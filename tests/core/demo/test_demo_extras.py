"""Issue 43 §6: the demo's extras: a second digits classifier (nemo compare demo's model B, trained by the demo's
training code, registered and loaded through the timm loader) for model-diff, and a fix folder that fix loads."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.demo import digits, extras
from nemo_desktop.core.store.paths import get_paths


def test_the_fix_folder_is_what_fix_loads_and_plants_a_real_cause(tmp_path):
    from nemo_desktop.core.analyses.fix.pipeline import load_fix_folder

    paths = get_paths()
    made = extras.ensure_fix_folder(paths)
    assert not made.reused and made.path == extras.fix_folder_dir(paths)
    data = load_fix_folder(made.path, list(digits.CLASS_NAMES))
    assert len(data.train) == 10 * extras.FIX_TRAIN_PER_CLASS
    affected = {digits.CLASS_NAMES.index(n) for n in extras.FIX_AFFECTED}
    assert {y for _, y in data.affected} == affected
    assert not {y for _, y in data.rest} & affected and len(data.affected) + len(data.rest) == 360
    # the cause: a blue background on every affected image, on one training image in ten, never on the rest
    def blue(img):
        return np.asarray(img.convert("RGB"))[0, 0].tolist() == [0, 0, 255]

    assert all(blue(im) for im, _ in data.affected) and not any(blue(im) for im, _ in data.rest)
    assert sum(blue(im) for im, _ in data.train) == 10 * (extras.FIX_TRAIN_PER_CLASS // extras.FIX_CAUSE_EVERY)
    assert made.settings == {"affected_classes": "one, four, seven", "data": "augment"}
    again = extras.ensure_fix_folder(paths)
    assert again.reused and again.summary == made.summary


def test_the_second_classifier_is_model_b_loaded_like_any_timm_model(monkeypatch):
    torch = pytest.importorskip("torch")
    from nemo_desktop.core.models.catalog import get_entry
    from nemo_desktop.core.models.families import load_model

    monkeypatch.setattr(extras, "SECOND_EPOCHS", 1)  # seconds; the product trains digits.EPOCHS
    paths = get_paths()
    made = extras.ensure_second_classifier(paths)
    assert not made.reused and made.model_id == extras.SECOND_CLASSIFIER_ID
    entry = get_entry(extras.SECOND_CLASSIFIER_ID)
    assert entry.family == "timm" and entry.source.startswith("local-dir:") and "model-diff" in entry.notes
    model = load_model(extras.SECOND_CLASSIFIER_ID)
    assert model.class_names == list(digits.CLASS_NAMES)
    # trained on model B's digits: 0-4 on every background colour, so it reads a four on green, not only on black
    from nemo_desktop.core.analyses.model_diff.synthetic_digits import glyph_pool, render_digit

    glyphs, labels = glyph_pool("eval")
    fours = [render_digit(g, rgb=(0, 255, 0), size=digits.IMAGE_SIDE) for g, y in zip(glyphs, labels) if y == 4]
    right = float((model.predict_proba(fours).argmax(1) == 4).mean())
    print(f"second demo classifier: {100 * right:.0f}% of {len(fours)} held-out fours on green (1 epoch)")
    assert right > 0.5
    assert extras.ensure_second_classifier(paths).reused
