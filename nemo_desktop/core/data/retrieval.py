"""Observation retrieval (SciTX stage 1, "Survey"; NEMO paper §3.2, Algorithm 1 and Table 5).

The three criteria of the paper: correctness (the classifier gets the reference right), class relevance
(its label is the ground truth y or the prediction ŷ) and semantic similarity (nearest neighbours of the
query in the classifier's feature space). With class relevance (the method):
  Set A: the k_true nearest correctly classified references of class y;
  Set B: the k_pred nearest correctly classified references of class ŷ;
  Set C: k_random random correctly classified references (of classes other than y and ŷ by default).

How many (the paper gives no numbers): K is read PER SET by default (`pooled=False`): k_true of y plus
k_pred of ŷ. `pooled=True` is the other reading of Algorithm 1's `Retrieve(x, D_filtered, K)`: the k_true
+ k_pred nearest references over both classes together (so with k_true = K and k_pred = 0, the K nearest of
y ∪ ŷ), each shown in the set of its own label. Set C is not in Algorithm 1 (it retrieves from the true and
predicted classes only) but is in the A.1 prompt ("Set C (Random Examples)"); k_random = 0 gives Algorithm 1
literally.

Without class relevance (`class_relevance=False`, Table 5's "Correctness + Semantic Similarity" row) only
the class filter changes: one set S of the same number of nearest correctly classified references, of any
class, and Set C drawn exactly as with class relevance (same k_random, same pool, minus S). Set S carries
each reference's own label; it must never be presented as "true class" / "predicted class" or as random.

Similarity is the dot product of L2-normalised embeddings (cosine), exact: a matrix product over the
memory-mapped feature matrix, read in chunks and reduced with a partial sort. The index stores the correct
references first, grouped by class, so sets A and B read only their class's slice and the ablation reads
the correct block once (the incorrect rows never). On a GPU the matrix is uploaded once and scored in one
product.
"""
from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base.errors import ConfigError
from ..base.records import Observation

SET_TRUE, SET_PRED, SET_RANDOM, SET_SIMILAR = "A", "B", "C", "S"
DEFAULT_K = 3
_CHUNK_ROWS = 65536
_BLAS_MIN_ROWS = 16384  # below this, score without BLAS threads (see _Scorer._block_scores)
_DENSE_FRACTION = 0.25  # scan a row range and mask, rather than gather, when this share of it is wanted


@dataclass
class RetrievalResult:
    observations: list[Observation]
    notes: list[str] = field(default_factory=list)  # why a set is empty or short
    params: dict[str, Any] = field(default_factory=dict)  # everything that determined the result (cache keys)

    def by_set(self, name: str) -> list[Observation]:
        return [o for o in self.observations if o.set_name == name]

    def __iter__(self):
        return iter(self.observations)

    def __len__(self) -> int:
        return len(self.observations)


def retrieve_observations(index, query_embedding: np.ndarray, true_label: int | str, pred_label: int | str, *,
                          k: int = DEFAULT_K, k_true: int | None = None, k_pred: int | None = None,
                          k_random: int | None = None, class_relevance: bool = True, pooled: bool = False,
                          random_from_other_classes: bool = True, query_sha256: str | None = None,
                          seed: int = 0, device: str = "cpu", chunk_rows: int = _CHUNK_ROWS) -> RetrievalResult:
    """Sets A/B/C (or S/C without class relevance) for one query; see the module docstring.

    `index`: a ReferenceIndex (entries, features, class_names; `rows_with_sha` is used when present).
    `query_sha256`: references with the same content are excluded (the query itself, if it is indexed);
    it also varies the random set per query (seeded by (seed, query hash)).
    `device`: "cpu", "cuda[:n]" or "auto" (a GPU when torch is already loaded and sees one).
    `pooled`: the k_true + k_pred nearest of y and ŷ together instead of per class (see the module docstring).
    """
    k_true = k if k_true is None else k_true
    k_pred = k if k_pred is None else k_pred
    k_random = k if k_random is None else k_random
    if min(k_true, k_pred, k_random) < 0:
        raise ValueError("k values must be >= 0")
    names = list(index.class_names)
    y, y_hat = _class_index(true_label, names, "true label"), _class_index(pred_label, names, "prediction")
    params = {"index_id": getattr(index, "index_id", None), "k_true": k_true, "k_pred": k_pred,
              "k_random": k_random, "class_relevance": class_relevance, "pooled": pooled,
              "random_from_other_classes": random_from_other_classes, "seed": seed}
    entries = index.entries
    notes: list[str] = []
    if len(entries) == 0:
        return RetrievalResult([], ["the reference index is empty: no observations"], params)

    q = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
    if q.shape[0] != index.features.shape[1]:
        raise ConfigError(f"The query embedding has {q.shape[0]} dimensions but the reference index has "
                          f"{index.features.shape[1]}.",
                          hint="Use a reference index built with the same classifier as the one being explained.")
    q = q / max(float(np.linalg.norm(q)), 1e-12)

    usable = np.asarray(entries.correct, dtype=bool).copy()
    if query_sha256:
        excluded = (index.rows_with_sha(query_sha256) if hasattr(index, "rows_with_sha")
                    else np.flatnonzero(entries.sha256 == query_sha256))
        usable[np.asarray(excluded, dtype=np.int64)] = False
    _drop_outside_roots(entries, usable, notes)
    labels = entries.labels
    scorer = _Scorer(index, q, _resolve_device(device), chunk_rows)
    picked: list[tuple[str, np.ndarray, np.ndarray]] = []

    other_classes = usable & (labels != y) & (labels != y_hat)
    pool = other_classes.copy() if random_from_other_classes else usable.copy()
    where = "of another class" if random_from_other_classes else ""
    y_name, p_name = names[y], names[y_hat]
    if class_relevance and pooled:
        both = usable & ((labels == y) | (labels == y_hat))
        rows, sims = scorer.top_k(np.flatnonzero(both), k_true + k_pred)
        is_true = labels[rows] == y
        picked.append((SET_TRUE, rows[is_true], sims[is_true]))
        picked.append((SET_PRED, rows[~is_true], sims[~is_true]))
        _note_short(notes, len(rows), k_true + k_pred, f"of the classes '{y_name}' and '{p_name}' (pooled)")
        if y_hat == y:
            notes.append(f"the prediction equals the true label ('{y_name}'): set B is left empty")
    elif class_relevance:
        rows, sims = scorer.top_k(np.flatnonzero(usable & (labels == y)), k_true)
        picked.append((SET_TRUE, rows, sims))
        _note_short(notes, len(rows), k_true, f"of the true class '{y_name}'")
        if y_hat == y:
            notes.append(f"the prediction equals the true label ('{y_name}'): set B is left empty")
            picked.append((SET_PRED, np.empty(0, np.int64), np.empty(0, np.float32)))
        else:
            rows, sims = scorer.top_k(np.flatnonzero(usable & (labels == y_hat)), k_pred)
            picked.append((SET_PRED, rows, sims))
            _note_short(notes, len(rows), k_pred, f"of the predicted class '{p_name}'")
    else:  # the Table 5 ablation: the class filter is the only difference
        rows, sims = scorer.top_k(np.flatnonzero(usable), k_true + k_pred)
        picked.append((SET_SIMILAR, rows, sims))
        _note_short(notes, len(rows), k_true + k_pred, "")
    for _, rows, _ in picked:
        pool[rows] = False
    rng = np.random.default_rng([seed, _query_seed(query_sha256)] if query_sha256 else seed)
    pool_rows = np.flatnonzero(pool)
    rows = (np.sort(rng.choice(pool_rows, size=min(k_random, len(pool_rows)), replace=False))
            if k_random and len(pool_rows) else np.empty(0, np.int64))
    picked.append((SET_RANDOM, rows, scorer.scores_of(rows)))
    if k_random:
        _note_short(notes, len(rows), k_random, f"{where} for the random set C".strip())

    observations = [Observation(set_name=name, image_path=str(entries.paths[r]), image_sha256=str(entries.sha256[r]),
                                label_index=int(labels[r]), label_name=names[int(labels[r])], similarity=float(s))
                    for name, rows, sims in picked for r, s in zip(rows.tolist(), sims.tolist())]
    return RetrievalResult(observations, notes, params)


def _drop_outside_roots(entries, usable: np.ndarray, notes: list[str]) -> None:
    """Inside a server (nemo mcp --root), an index built elsewhere may hold images that lead outside its roots:
    they are never observations (their content and path would reach the agent)."""
    from ..base.confine import current_roots, outside_reason

    if current_roots() is None:
        return
    outside = np.fromiter((outside_reason(p) is not None for p in entries.paths.tolist()), bool, len(entries))
    if outside.any():
        usable &= ~outside
        notes.append(f"{int(outside.sum())} reference image(s) lead outside the folders this server may use: "
                     "not used as observations")


def _query_seed(query_sha256: str) -> int:
    """60 bits of the query's hash (of any string, so a caller's own id works too)."""
    return int(hashlib.sha256(query_sha256.encode()).hexdigest()[:15], 16)


def _class_index(label: int | str, names: Sequence[str], what: str) -> int:
    if isinstance(label, (int, np.integer)) and not isinstance(label, bool):
        if 0 <= int(label) < len(names):
            return int(label)
        raise ConfigError(f"The {what} index {label} is outside the index's {len(names)} classes.",
                          hint="Use a class index of the classifier the reference index was built with.")
    if label in names:
        return list(names).index(label)
    raise ConfigError(f"The {what} '{label}' is not one of the reference index's classes.",
                      hint="Use one of the classifier's class names (or its class index).")


def _note_short(notes: list[str], got: int, wanted: int, what: str) -> None:
    what = f" {what}" if what else ""
    if wanted and got == 0:
        notes.append(f"no correctly classified reference{what}")
    elif got < wanted:
        notes.append(f"only {got} correctly classified reference{'s' if got != 1 else ''}{what} ({wanted} requested)")


def _resolve_device(device: str) -> str:
    if device == "auto":
        torch = sys.modules.get("torch")  # never import torch just to look for a GPU
        return "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    return device


class _Scorer:
    """Exact similarities of the query to chosen rows: chunked numpy on the CPU, one product on a GPU."""

    def __init__(self, index, q: np.ndarray, device: str, chunk_rows: int) -> None:
        self.features = index.features
        self.q = q
        self.chunk = max(1, int(chunk_rows))
        self._all: np.ndarray | None = None
        if device != "cpu":
            import torch

            feats = index.device_features(device)
            qt = torch.from_numpy(q).to(device=device, dtype=feats.dtype)
            self._all = (feats @ qt).float().cpu().numpy()

    def _block_scores(self, block: np.ndarray) -> np.ndarray:
        if block.dtype != np.float32:
            block = block.astype(np.float32)
        if len(block) < _BLAS_MIN_ROWS:
            # einsum's own loop: a threaded BLAS call costs ~30 ms of thread hand-off on a busy machine,
            # 100x the work of a class slice.
            return np.einsum("ij,j->i", block, self.q)
        return block @ self.q

    def scores_of(self, rows: np.ndarray) -> np.ndarray:
        if len(rows) == 0:
            return np.empty(0, np.float32)
        if self._all is not None:
            return self._all[rows]
        return self._block_scores(np.asarray(self.features[rows]))

    def top_k(self, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k rows (of the ascending `rows`) most similar to the query, best first (ties: lower row)."""
        if k <= 0 or len(rows) == 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        if self._all is not None:
            return _best(rows, self._all[rows], k)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        cand_rows, cand_scores = [], []
        if len(rows) >= _DENSE_FRACTION * (hi - lo):
            wanted = np.zeros(hi - lo, bool)
            wanted[rows - lo] = True
            for a in range(lo, hi, self.chunk):
                b = min(a + self.chunk, hi)
                s = self._block_scores(np.asarray(self.features[a:b]))
                member = wanted[a - lo:b - lo]
                if not member.all():
                    idx = np.flatnonzero(member)
                    r, sc = _best(idx + a, s[idx], k)
                else:
                    r, sc = _best(np.arange(a, b), s, k)
                cand_rows.append(r)
                cand_scores.append(sc)
        else:
            for a in range(0, len(rows), self.chunk):
                r = rows[a:a + self.chunk]
                r, sc = _best(r, self._block_scores(np.asarray(self.features[r])), k)
                cand_rows.append(r)
                cand_scores.append(sc)
        return _best(np.concatenate(cand_rows), np.concatenate(cand_scores), k)


def _best(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of (rows, scores) sorted by score descending, then row ascending."""
    if len(rows) > k:
        # Partition, then keep every row tied with the k-th score, so the tie-break below is exact.
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:k]
    return rows[order].astype(np.int64), scores[order].astype(np.float32)
