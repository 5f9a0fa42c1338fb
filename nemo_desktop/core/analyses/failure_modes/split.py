"""Step 1: split the analysed images into easy, hard and neutral (paper §4 and App. D).

The paper writes the rule for a *confidence* (hard = score < t_h) but plugs in entropy, an *uncertainty*,
with t_h = mean + a*std; so the inequalities are flipped for entropy (hard = H > mean + a*std, easy =
H < mean - a*std). For class probability and correctness (confidences) hard = s < mean - a*std, easy =
s > mean + a*std. Means and stds are population statistics over the analysed set. Per-class ranking (App. A):
hard = false negatives (true class c, top-1 not c) and false positives (top-1 c, true class not c), easy =
true positives. Neutral images are not clustered but stay in the set for the evaluation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Split:
    hard: np.ndarray  # int64 positions into the analysed arrays
    easy: np.ndarray
    neutral: np.ndarray
    score: str  # "entropy" | "correctness" | "class-probability" | "class-ranking"
    mean: float | None = None
    std: float | None = None
    hard_threshold: float | None = None
    easy_threshold: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"score": self.score, "mean": self.mean, "std": self.std, "hard_threshold": self.hard_threshold,
                "easy_threshold": self.easy_threshold, "hard": len(self.hard), "easy": len(self.easy),
                "neutral": len(self.neutral), "notes": list(self.notes)}


def threshold_split(scores: np.ndarray, a: float, *, higher_is_harder: bool, score: str) -> Split:
    """Mean +/- a*std thresholds on a per-image score (entropy: higher is harder; confidences: lower)."""
    s = np.asarray(scores, np.float64)
    if s.ndim != 1 or not np.isfinite(s).all():
        raise ValueError("split scores must be a finite 1-D array")
    idx = np.arange(len(s))
    if len(s) == 0:
        return Split(idx, idx, idx, score, notes=["no images to split"])
    mean, std = float(s.mean()), float(s.std())
    if higher_is_harder:
        t_h, t_e = mean + a * std, mean - a * std
        hard, easy = s > t_h, s < t_e
    else:
        t_h, t_e = mean - a * std, mean + a * std
        hard, easy = s < t_h, s > t_e
    notes = []
    if std == 0.0:
        notes.append(f"every image has the same {score} ({mean:.4g}): no image is harder than another, so the "
                     "hard set is empty")
    return Split(idx[hard], idx[easy], idx[~(hard | easy)], score, mean, std, t_h, t_e, notes)


def entropy_split(entropy: np.ndarray, a: float) -> Split:
    return threshold_split(entropy, a, higher_is_harder=True, score="entropy")


def probability_split(prob_true: np.ndarray, a: float) -> Split:
    return threshold_split(prob_true, a, higher_is_harder=False, score="class-probability")


def correctness_split(correct: np.ndarray, a: float) -> Split:
    return threshold_split(np.asarray(correct, np.float64), a, higher_is_harder=False, score="correctness")


def ranking_split(labels: np.ndarray, preds: np.ndarray, class_index: int) -> tuple[np.ndarray, Split]:
    """Per-class ranking split over the whole index: returns (rows of the analysed set = true c or top-1 c,
    Split whose positions index into those rows)."""
    labels, preds = np.asarray(labels), np.asarray(preds)
    rows = np.flatnonzero((labels == class_index) | (preds == class_index))
    lab, pre = labels[rows], preds[rows]
    tp = (lab == class_index) & (pre == class_index)
    pos = np.arange(len(rows))
    split = Split(pos[~tp], pos[tp], pos[:0], "class-ranking")
    fn = int(((lab == class_index) & (pre != class_index)).sum())
    split.notes.append(f"hard = {fn} false negatives + {len(rows) - fn - int(tp.sum())} false positives; "
                       f"easy = {int(tp.sum())} true positives")
    return rows, split


def entropy_from_top5(top5: list[list[float]], n_classes: int) -> float:
    """Entropy estimate for rows indexed before the entropy column existed: the stored top-5 probabilities,
    and the residual mass spread evenly over the other classes (the maximum-entropy completion, so this
    over-estimates the true entropy by at most the residual's spread)."""
    p = np.array([float(q) for _, q in top5], np.float64)
    h = float(-(p[p > 0] * np.log(p[p > 0])).sum())
    rest, others = max(0.0, 1.0 - float(p.sum())), n_classes - len(p)
    if rest > 0 and others > 0:
        h -= rest * np.log(rest / others)
    return h
