"""Filters and per-class accuracy over BrowseData (Qt-free, numpy: a few milliseconds at 100,000 images).

A filter produces the array of dataset rows to show, in display order; the grid's model then shows that
array. Rebuilding an index array is cheaper than a QSortFilterProxyModel asking Python about every row.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nemo_desktop.core.app.dataset_browser.prediction_counts import class_counts, order_by_confidence

from ....core.app.dataset_browser.browse_data import BrowseData

ALL, CORRECT, MISCLASSIFIED = "all", "correct", "misclassified"
DATASET_ORDER, CONFIDENCE_DESC, CONFIDENCE_ASC = "dataset", "confidence-desc", "confidence-asc"


@dataclass(frozen=True)
class FilterSpec:
    correctness: str = ALL
    true_class: int | None = None
    pred_class: int | None = None
    conf_min: float = 0.0  # confidence = P(predicted class)
    conf_max: float = 1.0
    order: str = DATASET_ORDER  # or CONFIDENCE_DESC / CONFIDENCE_ASC (P(predicted class))
    competency_max: float = 1.0  # show images whose competency is at most this (unscored ones drop out below 1)
    least_competent_first: bool = False  # order by competency, lowest first, unscored last (wins over `order`)

    @property
    def needs_predictions(self) -> bool:
        return (self.correctness != ALL or self.pred_class is not None
                or self.conf_min > 0.0 or self.conf_max < 1.0)


def filter_rows(data: BrowseData, spec: FilterSpec) -> np.ndarray:
    """Rows of `data` that pass `spec` (int64), in the spec's order (ascending rows by default; by competency or
    confidence when asked). Prediction filters match nothing in an un-indexed dataset, and a competency filter
    nothing without scores: there is nothing to match."""
    n = len(data)
    if spec.needs_predictions and not data.indexed:
        return np.empty(0, np.int64)
    comp = data.competency
    if spec.competency_max < 1.0 and comp is None:
        return np.empty(0, np.int64)
    mask = np.ones(n, bool)
    if spec.true_class is not None:
        mask &= data.labels == spec.true_class
    if spec.pred_class is not None:
        mask &= data.preds == spec.pred_class
    if spec.correctness == CORRECT:
        mask &= data.preds == data.labels
    elif spec.correctness == MISCLASSIFIED:
        mask &= data.preds != data.labels
    if spec.conf_min > 0.0:
        mask &= data.conf >= spec.conf_min
    if spec.conf_max < 1.0:
        mask &= data.conf <= spec.conf_max
    if spec.competency_max < 1.0:
        mask &= comp <= spec.competency_max  # NaN (not scored) compares False
    rows = np.flatnonzero(mask)
    if spec.least_competent_first and comp is not None:
        rows = rows[np.argsort(comp[rows], kind="stable")]  # NaN sorts last
    elif spec.order != DATASET_ORDER and data.indexed:
        rows = order_by_confidence(rows, data.conf, descending=spec.order == CONFIDENCE_DESC)
    return rows


@dataclass(frozen=True)
class ClassAccuracy:
    index: int
    name: str
    images: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.images if self.images else None


def class_accuracy(data: BrowseData) -> list[ClassAccuracy]:
    """Per true class: images and how many the classifier gets right (classes without images included)."""
    c = len(data.class_names)
    counts = class_counts(data.labels, data.preds, c)
    return [ClassAccuracy(i, data.class_names[i], int(counts.images[i]), int(counts.correct[i])) for i in range(c)]


# The filter rows' choices, as the user reads them.
CORRECTNESS = (("All images", ALL), ("Correct", CORRECT), ("Misclassified", MISCLASSIFIED))
ORDERS = (("Dataset order", DATASET_ORDER), ("Confidence, highest first", CONFIDENCE_DESC),
          ("Confidence, lowest first", CONFIDENCE_ASC))
