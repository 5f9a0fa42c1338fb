"""One analysed set, from arrays to a GroupResult: cluster the hard and easy sets, pair each hard cluster
with its nearest easy one, select K sentences per method, and evaluate when relevance is known.

Pure: no store, no models. The pipeline supplies joint embeddings, the split, per-image correctness and
the sentence embeddings; tests call this directly on constructed worlds.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .clustering import agglomerative, nearest_easy, nearest_members
from .config import FailureModesConfig
from .metrics import hard_sentences, lbee_scores, partition_precision
from .ranking import auto_tau, rank, similarities
from .result import EasyCluster, GroupResult, HardCluster
from .split import Split


@dataclass
class GroupData:
    """Arrays of one analysed set, aligned by position."""

    name: str
    class_index: int | None
    rows: np.ndarray  # index row numbers
    paths: Sequence[str]
    features: np.ndarray  # (n, D) unit joint embeddings
    correct: np.ndarray  # (n,) bool: omega for classification
    labels: np.ndarray
    preds: np.ndarray
    scores: np.ndarray | None  # split score per image (for cluster means), None for class-ranking


def _acc(correct: np.ndarray) -> float | None:
    return float(np.mean(correct)) if len(correct) else None


def analyse_group(data: GroupData, split: Split, sentence_emb: np.ndarray, sentence_texts: Sequence[str],
                  config: FailureModesConfig, class_names: Sequence[str], *,
                  relevance: np.ndarray | None = None) -> GroupResult:
    c = config.n_clusters
    hard_cl = agglomerative(data.features[split.hard], c, method=config.linkage,
                            max_points=config.max_ward_points, seed=config.seed)
    easy_cl = agglomerative(data.features[split.easy], c, method=config.linkage,
                            max_points=config.max_ward_points, seed=config.seed)
    pair, pair_sim = nearest_easy(hard_cl.prototypes, easy_cl.prototypes)
    v_hard = similarities(hard_cl.prototypes, sentence_emb)
    v_easy = similarities(easy_cl.prototypes, sentence_emb)
    notes = list(split.notes)
    if config.tau is None:
        both = np.concatenate([v_hard.ravel(), v_easy.ravel()])
        tau, tau_source = auto_tau(both), "auto"
    else:
        tau, tau_source = float(config.tau), "config"
    if len(split.hard) and not len(split.easy):
        notes.append("the easy set is empty: hard clusters are contrasted with nothing (PDiff = TopS)")
    group_acc = _acc(data.correct)

    hard_clusters: list[HardCluster] = []
    for i in range(hard_cl.k):
        pos = split.hard[hard_cl.members(i)]
        j = int(pair[i]) if pair[i] >= 0 else None
        v_e = v_easy[j] if j is not None else None
        acc = _acc(data.correct[pos])
        cl = HardCluster(
            id=i, size=len(pos), accuracy=acc,
            severity=(acc / group_acc) if acc is not None and group_acc else None,
            mean_score=float(np.mean(data.scores[pos])) if data.scores is not None and len(pos) else None,
            rows=data.rows[pos].tolist(), paths=[str(data.paths[p]) for p in pos],
            nearest_rows=data.rows[nearest_members(data.features, pos, hard_cl.prototypes[i],
                                                   config.nearest_members)].tolist(),
            confusions=_confusions(data, pos, class_names), nearest_easy=j,
            easy_similarity=float(pair_sim[i]) if j is not None else None)
        for method in config.methods:
            ranked = rank(method, v_hard[i], v_e, config.k, tau)
            picks = [_pick(s, sentence_texts, v_hard[i], v_e) for s in ranked.indices]
            for p in picks[len(picks) - ranked.padded:] if ranked.padded else []:
                p["padded"] = True
            cl.sentences[method] = picks
            cl.tau_fallback[method] = ranked.tau_fallback
            cl.tau_padded[method] = ranked.padded
        hard_clusters.append(cl)

    easy_clusters = []
    for j in range(easy_cl.k):
        pos = split.easy[easy_cl.members(j)]
        easy_clusters.append(EasyCluster(j, len(pos), _acc(data.correct[pos]), data.rows[pos].tolist(),
                                         data.rows[nearest_members(data.features, pos, easy_cl.prototypes[j],
                                                                   config.nearest_members)].tolist()))
    for m in config.methods:
        fell = sum(bool(cl.tau_fallback.get(m)) for cl in hard_clusters)
        if fell:
            notes.append(f"{m}: in {fell} of {len(hard_clusters)} hard clusters fewer than K = {config.k} sentences "
                         f"passed tau = {tau:.3f} ({tau_source}); their remaining picks are TopS's (marked 'padded')")
    retrieved = {m: sorted({p["index"] for cl in hard_clusters for p in cl.sentences[m]}) for m in config.methods}
    evaluation = None
    if relevance is not None:
        gt = hard_sentences(data.correct.astype(np.float64), relevance, config.beta_factor)
        members = [split.hard[hard_cl.members(i)] for i in range(hard_cl.k)]
        evaluation = {"ground_truth": gt.to_dict(), "methods": {
            m: lbee_scores([[p["index"] for p in cl.sentences[m]] for cl in hard_clusters], members, relevance,
                           gt.hard_sentences).to_dict() for m in config.methods},
            "p_at_k": partition_precision(data.features, list(hard_cl.prototypes) + list(easy_cl.prototypes),
                                          relevance, gt.hard_sentences, config.p_at_k)}
        if not gt.hard_sentences:
            notes.append("no sentence describes images that are harder than the rest by beta: TPR is undefined")
    order = sorted(hard_clusters, key=lambda h: (h.accuracy if h.accuracy is not None else 2.0, -h.size, h.id))
    return GroupResult(
        name=data.name, class_index=data.class_index, size=len(data.rows), accuracy=group_acc,
        split=split.to_dict(), tau=tau, tau_source=tau_source, hard_clusters=order, easy_clusters=easy_clusters,
        retrieved=retrieved,
        clustering={"clusters": c, "linkage": config.linkage, "hard_found": hard_cl.k, "easy_found": easy_cl.k,
                    "hard_subsampled": hard_cl.subsampled, "easy_subsampled": easy_cl.subsampled,
                    "max_points": config.max_ward_points},
        evaluation=evaluation, notes=notes)


def _pick(s: int, texts: Sequence[str], v_h: np.ndarray, v_e: np.ndarray | None) -> dict:
    ve = float(v_e[s]) if v_e is not None else None
    return {"index": int(s), "text": texts[s], "v_h": float(v_h[s]), "v_e": ve,
            "d": float(v_h[s]) - ve if ve is not None else None}


def _confusions(data: GroupData, pos: np.ndarray, class_names: Sequence[str], top: int = 5) -> list[dict]:
    wrong = pos[data.labels[pos] != data.preds[pos]]
    counts = Counter(zip(data.labels[wrong].tolist(), data.preds[wrong].tolist()))
    return [{"true": class_names[t] if 0 <= t < len(class_names) else str(t),
             "pred": class_names[p] if 0 <= p < len(class_names) else str(p), "count": n}
            for (t, p), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
