"""A warning when one class takes most of a classifier's predictions over a labelled dataset (issue 19).

A classifier whose preprocessing does not match its training (input size, normalisation, interpolation)
often predicts one class for every image with p close to 1: the same weights measured 93.3 % through a timm
folder with its config and 10.0 % through an import that used the architecture's defaults. After indexing,
this check says so instead of letting a 10 % index look like a hard dataset.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

DOMINANT_SHARE = 0.5  # one class predicted for at least half of the images...
LABEL_RATIO = 2.0  # ...and at least twice as often as it is the true label


def dominant_prediction_warning(preds: np.ndarray, labels: np.ndarray, class_names: Sequence[str], *,
                                share: float = DOMINANT_SHARE, ratio: float = LABEL_RATIO) -> str | None:
    """The warning text when one class takes `share` of the predictions and `ratio` times its label share;
    else None. Needs at least 10 images of at least 2 labelled classes to say anything."""
    preds = np.asarray(preds, dtype=np.int64)
    labels = np.asarray(labels, dtype=np.int64)
    keep = preds >= 0
    preds, labels = preds[keep], labels[keep]
    n = len(preds)
    if n < 10 or len(np.unique(labels)) < 2:
        return None
    counts = np.bincount(preds, minlength=len(class_names))
    top = int(np.argmax(counts))
    pred_share = counts[top] / n
    label_share = float(np.mean(labels == top))
    if pred_share < share or pred_share < ratio * label_share:
        return None
    name = class_names[top] if top < len(class_names) else f"class {top}"
    return (f"{counts[top]:,} of {n:,} images ({100 * pred_share:.0f} %) are predicted as '{name}', which is the "
            f"true class of {100 * label_share:.0f} %. A classifier that predicts one class for most images "
            "usually gets the wrong preprocessing: check its input size, normalisation and interpolation "
            "(Model manager: the classifier's import settings).")
