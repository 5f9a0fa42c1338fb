"""Step 3-4: sentence similarities of prototypes and the four selection methods (paper §4).

v = cosine(prototype, sentence) for every sentence; for a hard cluster i and its nearest easy cluster j:
  TopS    the K largest v_h (no contrast; a FACTS-like baseline);
  PDiff   the K largest d = v_h - v_e (≈ DOMINO's describer with the nearest easy prototype as reference);
  SetDiff the K largest v_h among sentences NOT in S_e = {v_e > tau};
  FPDiff  the K largest d among sentences IN S_h = {v_h > tau}.
The paper claims |R| = K is guaranteed but gives no rule when fewer than K sentences qualify: we pad with the
next sentences by v_h and flag the cluster `tau_fallback`; the padded picks are TopS's, not the method's, and are
marked as such in the result (`padded` on the pick, `tau_padded` per method) and said in every output. Ties keep
sentence-set order (stable sorts).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .clustering import unit_rows


@dataclass
class Ranked:
    indices: list[int]  # sentence indices, best first (exactly K, or every sentence if fewer exist)
    tau_fallback: bool = False  # padded by v_h because fewer than K sentences passed the tau rule
    padded: int = 0  # how many of `indices` (the last ones) are that padding: TopS's picks, not the method's


def similarities(protos: np.ndarray, sentence_emb: np.ndarray) -> np.ndarray:
    """(P, N) cosine similarities between prototypes and unit sentence embeddings."""
    if len(protos) == 0:
        return np.zeros((0, len(sentence_emb)), np.float32)
    return (unit_rows(protos) @ unit_rows(sentence_emb).T).astype(np.float32)


def auto_tau(sims: np.ndarray) -> float:
    """Our heuristic for embedders other than OpenCLIP: mean + 1 std of all prototype-sentence cosines
    (the paper's 0.25 sits about that far above its 0.17 mean similarity)."""
    s = np.asarray(sims, np.float64).ravel()
    return float(s.mean() + s.std()) if len(s) else 0.0


def _top(scores: np.ndarray, allowed: np.ndarray, k: int, v_h: np.ndarray) -> Ranked:
    order = np.argsort(-scores, kind="stable")
    chosen = [int(i) for i in order if allowed[i]][:k]
    if len(chosen) >= min(k, len(scores)):
        return Ranked(chosen)
    rest = [int(i) for i in np.argsort(-v_h, kind="stable") if int(i) not in chosen]
    pad = rest[:k - len(chosen)]
    return Ranked(chosen + pad, tau_fallback=True, padded=len(pad))


def rank_tops(v_h: np.ndarray, v_e: np.ndarray, k: int, tau: float) -> Ranked:
    return _top(v_h, np.ones(len(v_h), bool), k, v_h)


def rank_pdiff(v_h: np.ndarray, v_e: np.ndarray, k: int, tau: float) -> Ranked:
    return _top(v_h - v_e, np.ones(len(v_h), bool), k, v_h)


def rank_setdiff(v_h: np.ndarray, v_e: np.ndarray, k: int, tau: float) -> Ranked:
    return _top(v_h, ~(v_e > tau), k, v_h)


def rank_fpdiff(v_h: np.ndarray, v_e: np.ndarray, k: int, tau: float) -> Ranked:
    return _top(v_h - v_e, v_h > tau, k, v_h)


RANKERS = {"tops": rank_tops, "pdiff": rank_pdiff, "setdiff": rank_setdiff, "fpdiff": rank_fpdiff}


def rank(method: str, v_h: np.ndarray, v_e: np.ndarray | None, k: int, tau: float) -> Ranked:
    """One method on one hard cluster. Without an easy cluster (empty easy set) the contrast is against
    nothing: v_e = 0, so PDiff equals TopS and SetDiff keeps every sentence (recorded by the caller)."""
    v_h = np.asarray(v_h, np.float64)
    v_e = np.zeros_like(v_h) if v_e is None else np.asarray(v_e, np.float64)
    return RANKERS[method](v_h, v_e, int(k), float(tau))


def images_by_sentence(features: np.ndarray, sentence_emb: np.ndarray, rows: np.ndarray | None = None,
                       top: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows (all, or the given ones, e.g. a cluster's) ordered by cosine to one sentence, best first, with
    their similarities: the paper's fn. 4 inspection ("rank the images in the cluster for a sentence").
    Rows whose embedding is missing (NaN) are left out."""
    rows = np.arange(len(features)) if rows is None else np.asarray(rows, np.int64)
    x = np.asarray(features[rows], np.float32)
    ok = ~np.isnan(x).any(axis=1)
    rows, x = rows[ok], x[ok]
    sims = unit_rows(x) @ unit_rows(np.asarray(sentence_emb, np.float32)[None])[0]
    order = np.argsort(-sims, kind="stable")[:top]
    return rows[order], sims[order]
