"""Confusion matrix, per-class counts and confidence order from the rows of a reference index.

Inputs are the index's column arrays (true label, predicted class, P(predicted class)), one entry per image;
rows not indexed yet carry prediction -1 and are left out of every prediction count (the counts say their n).
numpy only: a 1,000-class matrix over 100,000 images is one bincount (milliseconds).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _indexed(preds: np.ndarray) -> np.ndarray:
    return np.asarray(preds) >= 0


def confusion_matrix(labels: np.ndarray, preds: np.ndarray, n_classes: int) -> np.ndarray:
    """counts[i, j] = images of true class i predicted as j (int64, n_classes × n_classes); un-indexed rows
    (prediction -1) are not counted."""
    labels, preds = np.asarray(labels, np.int64), np.asarray(preds, np.int64)
    if labels.shape != preds.shape:
        raise ValueError(f"labels and predictions differ in length ({len(labels)} and {len(preds)})")
    keep = _indexed(preds)
    if np.any(labels[keep] >= n_classes) or np.any(preds[keep] >= n_classes) or np.any(labels < 0):
        raise ValueError(f"a label or prediction is outside the {n_classes} classes")
    flat = labels[keep] * n_classes + preds[keep]
    return np.bincount(flat, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


@dataclass(frozen=True)
class ClassCounts:
    """Per true class: images, how many are indexed (have a prediction), and how many are predicted right."""

    images: np.ndarray
    indexed: np.ndarray
    correct: np.ndarray

    def accuracy(self) -> np.ndarray:
        """correct / indexed per class; NaN for a class without indexed images."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.indexed > 0, self.correct / np.maximum(self.indexed, 1), np.nan)


def class_counts(labels: np.ndarray, preds: np.ndarray, n_classes: int) -> ClassCounts:
    labels, preds = np.asarray(labels, np.int64), np.asarray(preds, np.int64)
    keep = _indexed(preds)
    return ClassCounts(images=np.bincount(labels, minlength=n_classes),
                       indexed=np.bincount(labels[keep], minlength=n_classes),
                       correct=np.bincount(labels[keep & (preds == labels)], minlength=n_classes))


def order_by_confidence(rows: np.ndarray, conf: np.ndarray, *, descending: bool = True) -> np.ndarray:
    """`rows` reordered by conf[row] (P(predicted class)); ties keep their order; rows without a confidence
    (NaN: not indexed) go last either way."""
    rows = np.asarray(rows, np.int64)
    c = np.asarray(conf, np.float64)[rows]
    key = np.where(np.isnan(c), np.inf, -c if descending else c)
    return rows[np.argsort(key, kind="stable")]


def most_confident_mistakes(labels: np.ndarray, preds: np.ndarray, conf: np.ndarray) -> np.ndarray:
    """Rows the classifier gets wrong, most confident first: where it is sure and wrong is where to look."""
    labels, preds = np.asarray(labels), np.asarray(preds)
    wrong = np.flatnonzero(_indexed(preds) & (preds != labels))
    return order_by_confidence(wrong, conf, descending=True)
