"""LBEE evaluation (paper §3 Eq. 1, §5 Eqs. 3-5, App. C.2 Eqs. 6-9) and P@K (App. B).

Given per-image performance omega (top-1 correctness here) and binary relevance Gamma (images x sentences):
  S*_beta = {s : mean omega over X_s < mean omega over X - beta}, beta = o * std(omega) (population std);
  a sentence relevant to no image is not in S*.
  HR_i = |R_i ∩ S*| / |R_i|,  AHR = mean_i HR_i
  CR_i = mean over s in R_i of (fraction of cluster i's images relevant to s),  ACR = mean_i CR_i
  TPR = |R_S ∩ S*| / |S*|,  JI = |R_S ∩ S*| / |R_S ∪ S*|,  R_S = union of the R_i.
Undefined ratios (no clusters, empty S*, empty union) are None, never 0: a table must not pass "no data"
off as a score.
P@K (App. B) judges the clusters rather than the sentences: `partition_precision` takes the images of each
sentence in S*_beta as a ground-truth group (our stand-in for the paper's annotated bias-conflicting groups) and
the union of hard and easy clusters as the predicted partitions, each ranking the images by cosine to its
prototype; it is reported once per set beside the per-method metrics.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np


@dataclass
class GroundTruth:
    omega_avg: float
    omega_std: float
    beta: float
    sentence_omega: list[float | None]  # per sentence; None when no image is relevant
    sentence_support: list[int]  # |X_s|
    hard_sentences: list[int]  # S*_beta as sentence indices

    def to_dict(self) -> dict:
        return asdict(self)


def hard_sentences(omega: np.ndarray, relevance: np.ndarray, beta_factor: float) -> GroundTruth:
    """S*_beta from per-image omega (M,) and relevance (M, N) booleans."""
    omega = np.asarray(omega, np.float64)
    rel = np.asarray(relevance, bool)
    if rel.shape[0] != len(omega):
        raise ValueError(f"relevance has {rel.shape[0]} rows for {len(omega)} images")
    avg, std = (float(omega.mean()), float(omega.std())) if len(omega) else (float("nan"), 0.0)
    beta = float(beta_factor) * std
    support = rel.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        per = (rel * omega[:, None]).sum(axis=0) / support
    per_list = [None if n == 0 else float(v) for v, n in zip(per, support)]
    star = [i for i, v in enumerate(per_list) if v is not None and v < avg - beta]
    return GroundTruth(avg, std, beta, per_list, support.astype(int).tolist(), star)


@dataclass
class LbeeScores:
    ahr: float | None
    acr: float | None
    tpr: float | None
    ji: float | None
    hr: list[float | None]  # per hard cluster
    cr: list[float | None]
    retrieved: list[int]  # R_S
    true_positives: list[int]  # R_S ∩ S*

    def to_dict(self) -> dict:
        return asdict(self)


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def lbee_scores(selected: Sequence[Sequence[int]], cluster_members: Sequence[np.ndarray], relevance: np.ndarray,
                star: Sequence[int]) -> LbeeScores:
    """AHR, ACR, TPR, JI for one method: `selected[i]` = R_i (sentence indices) of hard cluster i whose
    image positions (rows of `relevance`) are `cluster_members[i]`."""
    rel = np.asarray(relevance, bool)
    star_set = set(int(s) for s in star)
    hr, cr = [], []
    for r, members in zip(selected, cluster_members):
        r = [int(s) for s in r]
        if not r:
            hr.append(None)
            cr.append(None)
            continue
        hr.append(len(star_set.intersection(r)) / len(r))
        members = np.asarray(members, np.int64)
        cr.append(float(np.mean([rel[members, s].mean() for s in r])) if len(members) else None)
    union = sorted({int(s) for r in selected for s in r})
    tp = sorted(star_set.intersection(union))
    both = star_set.union(union)
    return LbeeScores(_mean(hr), _mean(cr), len(tp) / len(star_set) if star_set else None,
                      len(tp) / len(both) if both else None, hr, cr, union, tp)


def precision_at_k(groups: Sequence[np.ndarray], ranked_partitions: Sequence[np.ndarray], k: int) -> float:
    """P@K (App. B, FACTS' protocol): for each ground-truth group z_n, the predicted partition whose top-K
    ranked items overlap z_n most; mean over groups of that overlap / K. `ranked_partitions[m]` lists item
    ids by decreasing likelihood of belonging to partition m (for us: distance to the prototype)."""
    if not groups:
        raise ValueError("P@K needs at least one ground-truth group")
    if k < 1:
        raise ValueError("P@K needs K >= 1")
    tops = [set(np.asarray(p)[:k].tolist()) for p in ranked_partitions]
    best = [max((len(set(np.asarray(g).tolist()) & t) for t in tops), default=0) for g in groups]
    return float(np.mean(best) / k)


def partition_precision(features: np.ndarray, prototypes: Sequence[np.ndarray], relevance: np.ndarray,
                        star: Sequence[int], k: int) -> dict:
    """P@K of a set's clusters (hard and easy together, as the paper's Tab. 3 uses their union) against the
    ground-truth groups X_s of the sentences s in S*_beta: each prototype ranks all of the set's images (rows of
    `features`, unit embeddings) by cosine, closest first. None when S* is empty or there is no cluster."""
    rel = np.asarray(relevance, bool)
    groups = [np.flatnonzero(rel[:, s]) for s in star]
    groups = [g for g in groups if len(g)]
    out = {"k": int(k), "groups": len(groups), "partitions": len(prototypes), "value": None}
    if not groups or not len(prototypes):
        return out
    x = np.asarray(features, np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    ranked = []
    for p in prototypes:
        p = np.asarray(p, np.float64)
        ranked.append(np.argsort(-(x @ (p / max(np.linalg.norm(p), 1e-12))), kind="stable"))
    out["value"] = precision_at_k(groups, ranked, k)
    return out
