"""Confusion matrix, per-class counts and confidence order on a small index whose numbers are worked out by hand."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.app.dataset_browser.prediction_counts import (class_counts, confusion_matrix,
                                                                     most_confident_mistakes, order_by_confidence)

# Ten images, three classes; row 9 is not indexed yet (prediction -1, confidence NaN).
LABELS = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
PREDS = np.array([0, 0, 1, 2, 1, 0, 0, 2, 1, -1])
CONF = np.array([.9, .6, .8, .55, .7, .95, .4, .99, .8, np.nan], np.float32)


def test_confusion_matrix_counts_each_true_predicted_pair():
    m = confusion_matrix(LABELS, PREDS, 3)
    assert m.tolist() == [[2, 1, 1],
                          [2, 1, 0],
                          [0, 1, 1]]
    assert m.sum() == 9  # the un-indexed image is not counted


def test_confusion_matrix_refuses_out_of_range_classes():
    with pytest.raises(ValueError, match="outside the 3 classes"):
        confusion_matrix(np.array([0, 3]), np.array([0, 1]), 3)
    with pytest.raises(ValueError, match="differ in length"):
        confusion_matrix(np.array([0, 1]), np.array([0]), 3)


def test_class_counts_and_accuracy():
    k = class_counts(LABELS, PREDS, 4)  # class 3 has no images
    assert k.images.tolist() == [4, 3, 3, 0]
    assert k.indexed.tolist() == [4, 3, 2, 0]
    assert k.correct.tolist() == [2, 1, 1, 0]
    acc = k.accuracy()
    assert acc[:3].tolist() == [0.5, pytest.approx(1 / 3), 0.5] and np.isnan(acc[3])


def test_most_confident_mistakes_come_first():
    # Wrong: rows 2 (.8), 3 (.55), 5 (.95), 6 (.4), 8 (.8); the tie .8 keeps row order (2 before 8).
    assert most_confident_mistakes(LABELS, PREDS, CONF).tolist() == [5, 2, 8, 3, 6]


def test_order_by_confidence_puts_unindexed_rows_last_both_ways():
    rows = np.array([9, 0, 6, 7])
    assert order_by_confidence(rows, CONF).tolist() == [7, 0, 6, 9]
    assert order_by_confidence(rows, CONF, descending=False).tolist() == [6, 0, 7, 9]
