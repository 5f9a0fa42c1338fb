"""Step 2-3 geometry: agglomerative clustering of each set, prototypes, and each hard prototype's nearest
easy prototype.

Library: scipy.cluster.hierarchy (`linkage` + `fcluster(criterion="maxclust")`): the reference
implementation of Ward (1963) with the Lance-Williams update, which scikit-learn's AgglomerativeClustering
also wraps; scipy is already pulled in by the stack and gives the full dendrogram without a fitted-estimator
object. Embeddings are L2-normalised first (our choice: the paper does not say; it makes Euclidean Ward
agree with the cosine geometry used for sentences). Exact Ward needs n(n-1)/2 float64 distances; above
`max_points` a seeded subsample is clustered and every other point joins its nearest prototype
(Euclidean, the Ward criterion's metric); prototypes are then the means of all members.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Clustering:
    labels: np.ndarray  # int64 cluster id per point, 0..k-1 ordered by each cluster's first point
    prototypes: np.ndarray  # (k, D) float32 means of the members' unit embeddings
    subsampled: int | None = None  # points clustered exactly when the subsample path was taken

    @property
    def k(self) -> int:
        return len(self.prototypes)

    def members(self, cluster: int) -> np.ndarray:
        return np.flatnonzero(self.labels == cluster)


def unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _canonical(labels: np.ndarray) -> np.ndarray:
    """Relabel so that cluster ids follow the order of each cluster's first point (deterministic ids)."""
    uniq, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    return rank[inverse.reshape(-1)]


def prototypes(x: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """Mean embedding of each cluster 0..k-1 (paper: the prototype is the members' average)."""
    x = np.asarray(x, np.float32)
    sums = np.zeros((k, x.shape[1]), np.float64)
    np.add.at(sums, labels, x)
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    return (sums / np.maximum(counts, 1)[:, None]).astype(np.float32)


def agglomerative(x: np.ndarray, n_clusters: int, *, method: str = "ward", max_points: int = 8000,
                  seed: int = 0) -> Clustering:
    """Cluster the rows of `x` (unit-normalised here) into min(n_clusters, n) clusters."""
    from scipy.cluster.hierarchy import fcluster, linkage

    x = unit_rows(x)
    n = len(x)
    if n == 0:
        return Clustering(np.zeros(0, np.int64), np.zeros((0, x.shape[1] if x.ndim == 2 else 0), np.float32))
    k = min(int(n_clusters), n)
    if k == n:  # fewer points than clusters: one singleton cluster each
        labels = np.arange(n, dtype=np.int64)
        return Clustering(labels, prototypes(x, labels, n))
    sub = None
    fit = x
    if n > max_points:
        sub = np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))
        fit = x[sub]
    z = linkage(fit.astype(np.float64), method=method, metric="euclidean")
    fit_labels = _canonical(fcluster(z, t=k, criterion="maxclust").astype(np.int64) - 1)
    k_found = int(fit_labels.max()) + 1
    if sub is None:
        return Clustering(fit_labels, prototypes(x, fit_labels, k_found))
    protos = prototypes(fit, fit_labels, k_found)
    labels = nearest_prototype(x, protos)
    labels[sub] = fit_labels  # the exactly clustered points keep their clusters
    return Clustering(labels, prototypes(x, labels, k_found), subsampled=len(sub))


def nearest_prototype(x: np.ndarray, protos: np.ndarray, block: int = 65536) -> np.ndarray:
    """Index of the nearest prototype (Euclidean) for every row, in blocks (bounded memory)."""
    out = np.empty(len(x), np.int64)
    p2 = (protos.astype(np.float32) ** 2).sum(1)
    for s in range(0, len(x), block):
        xb = np.asarray(x[s:s + block], np.float32)
        out[s:s + len(xb)] = np.argmin(p2[None, :] - 2 * xb @ protos.T, axis=1)
    return out


def nearest_easy(hard_protos: np.ndarray, easy_protos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each hard prototype: the closest easy prototype by cosine (the paper's "distance in F" is not
    specified; cosine matches the sentence similarities) and that similarity. Ties: the lower easy id."""
    if len(easy_protos) == 0:
        return np.full(len(hard_protos), -1, np.int64), np.full(len(hard_protos), np.nan, np.float32)
    sims = unit_rows(hard_protos) @ unit_rows(easy_protos).T
    best = np.argmax(sims, axis=1)
    return best.astype(np.int64), sims[np.arange(len(best)), best].astype(np.float32)


def nearest_members(x: np.ndarray, members: np.ndarray, prototype: np.ndarray, n: int) -> np.ndarray:
    """The `n` members closest (cosine) to the prototype, closest first (thumbnails, paper fn. 4)."""
    if len(members) == 0:
        return members
    sims = unit_rows(x[members]) @ unit_rows(prototype[None])[0]
    return members[np.argsort(-sims, kind="stable")[:n]]
