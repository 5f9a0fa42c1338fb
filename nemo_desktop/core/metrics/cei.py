"""Counterfactual Explanation Impact (NEMO paper §3.3, eq. 6), in percentage points:

    CEI = 100 × (P(y | s_e) − P(y | s_o))

s_o is the original inference source (the image, or the zero-shot prompt), s_e its counterfactual derived
from the explanation alone. Positive: the intervention moves the classifier towards the true class y.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from ..base.records import Candidate, ClassScore


def cei(prob_true_after: float, prob_true_before: float) -> float:
    """100 × (P(y|s_e) − P(y|s_o)); both probabilities must lie in [0, 1]."""
    for name, p in (("prob_true_after", prob_true_after), ("prob_true_before", prob_true_before)):
        if not (0.0 <= float(p) <= 1.0) or math.isnan(float(p)):
            raise ValueError(f"{name} must be a probability in [0, 1], got {p!r}")
    return 100.0 * (float(prob_true_after) - float(prob_true_before))


def top_k(probs: Sequence[float] | np.ndarray, class_names: Sequence[str], k: int = 5) -> list[ClassScore]:
    """The k most probable classes, most probable first (ties broken by class index)."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    if len(p) != len(class_names):
        raise ValueError(f"{len(p)} probabilities for {len(class_names)} class names")
    order = np.lexsort((np.arange(len(p)), -p))[:k]
    return [ClassScore(int(i), str(class_names[i]), float(p[i])) for i in order]


def rank_of(probs: Sequence[float] | np.ndarray, index: int) -> int:
    """1-based rank of class `index` (1 = most probable)."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    return int(np.sum(p > p[index])) + 1


def best_candidate(candidates: Iterable[Candidate]) -> int | None:
    """Index of the candidate with the largest CEI (the first one on ties); None if none was scored."""
    best, best_score = None, -math.inf
    for i, c in enumerate(candidates):
        if c.cei is not None and c.error is None and c.cei > best_score:
            best, best_score = i, c.cei
    return best
