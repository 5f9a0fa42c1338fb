"""The after-indexing warning when one class takes most predictions (a preprocessing mismatch)."""
from __future__ import annotations

import numpy as np

from nemo_desktop.core.data.prediction_check import dominant_prediction_warning

NAMES = [f"c{i}" for i in range(10)]


def test_collapse_onto_one_class_is_warned():
    labels = np.repeat(np.arange(10), 10)
    preds = np.full(100, 3)
    preds[:5] = labels[:5]
    text = dominant_prediction_warning(preds, labels, NAMES)
    assert text.startswith("95 of 100 images (95 %) are predicted as 'c3', which is the true class of 10 %")
    assert "input size, normalisation and interpolation" in text


def test_no_warning_for_a_working_or_a_skewed_dataset():
    labels = np.repeat(np.arange(10), 10)
    assert dominant_prediction_warning(labels, labels, NAMES) is None  # accurate
    rng = np.random.default_rng(0)
    assert dominant_prediction_warning(rng.integers(0, 10, 100), labels, NAMES) is None  # poor but spread
    skewed = np.array([0] * 80 + list(range(1, 10)) * 2 + [1, 2])  # most images truly are class 0
    assert dominant_prediction_warning(skewed, skewed, NAMES) is None
    assert dominant_prediction_warning(np.zeros(5, int), np.arange(5), NAMES) is None  # too few to say
    not_indexed = np.full(100, -1)
    assert dominant_prediction_warning(not_indexed, labels, NAMES) is None
