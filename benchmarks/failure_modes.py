"""Failure-modes analysis: time of each stage and peak memory of clustering, on random data.

usage: python benchmarks/failure_modes.py [--sizes 1e4,1e5] [--dim 512] [--sentences 148] [--clusters 15]
                                          [--max-ward-points 8000] [--store-rows 1e4]

Per size N: random unit image embeddings (D dims), random per-image entropies and correctness, random unit
sentence embeddings. Stages: the entropy split, Ward clustering of the hard and of the easy set (each above
--max-ward-points: seeded subsample + nearest-prototype assignment), sentence ranking with the four methods,
the whole `analyse_group` (all of the above plus bookkeeping), and the JSON size of the result. Peak memory of
clustering is measured with tracemalloc (numpy and scipy's distance arrays are traced), so it is the Python
heap's peak for that step, not the process RSS. `--store-rows` also times storing and re-opening joint
embeddings of that many rows through the results store (the model's embedding time is not included: it
depends on the embedder and is the classifier-throughput benchmark's business).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from nemo_desktop.core.analyses.failure_modes.clustering import agglomerative
from nemo_desktop.core.analyses.failure_modes.config import FailureModesConfig
from nemo_desktop.core.analyses.failure_modes.discover import GroupData, analyse_group
from nemo_desktop.core.analyses.failure_modes.ranking import rank, similarities
from nemo_desktop.core.analyses.failure_modes.split import entropy_split


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def bench(n: int, dim: int, n_sent: int, clusters: int, max_points: int) -> dict:
    rng = np.random.default_rng(0)
    feats = _unit(rng.standard_normal((n, dim)))
    entropy = rng.gamma(2.0, 0.3, n)
    correct = rng.random(n) < 0.8
    sent = _unit(rng.standard_normal((n_sent, dim)))
    cfg = FailureModesConfig(clusters=clusters, max_ward_points=max_points)
    out = {"n": n, "dim": dim, "sentences": n_sent, "clusters": clusters, "max_ward_points": max_points}

    t = time.perf_counter()
    split = entropy_split(entropy, cfg.a)
    out["split_s"] = time.perf_counter() - t
    out["hard"], out["easy"] = len(split.hard), len(split.easy)

    tracemalloc.start()
    t = time.perf_counter()
    hard = agglomerative(feats[split.hard], clusters, max_points=max_points)
    out["cluster_hard_s"] = time.perf_counter() - t
    t = time.perf_counter()
    easy = agglomerative(feats[split.easy], clusters, max_points=max_points)
    out["cluster_easy_s"] = time.perf_counter() - t
    out["cluster_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    out["subsampled"] = [hard.subsampled, easy.subsampled]

    t = time.perf_counter()
    vh, ve = similarities(hard.prototypes, sent), similarities(easy.prototypes, sent)
    for i in range(hard.k):
        for m in cfg.methods:
            rank(m, vh[i], ve[0], cfg.k, cfg.tau)
    out["rank_s"] = time.perf_counter() - t

    texts = [f"sentence {i}" for i in range(n_sent)]
    data = GroupData("all", None, np.arange(n), [f"/data/img_{i:07d}.png" for i in range(n)], feats, correct,
                     np.zeros(n, np.int64), np.where(correct, 0, 1), entropy)
    t = time.perf_counter()
    g = analyse_group(data, split, sent, texts, cfg, ["a", "b"])
    out["analyse_group_s"] = time.perf_counter() - t
    t = time.perf_counter()
    from dataclasses import asdict

    out["result_json_mb"] = len(json.dumps(asdict(g))) / 2**20
    out["to_json_s"] = time.perf_counter() - t
    return out


def bench_store(rows: int, dim: int) -> dict:
    from nemo_desktop.core.store import ResultsStore

    with tempfile.TemporaryDirectory() as tmp, ResultsStore.open(db_path=Path(tmp) / "s.sqlite") as store:
        m = _unit(np.random.default_rng(1).standard_normal((rows, dim)))
        t = time.perf_counter()
        store.save_array("fmjoint-bench", m)
        save = time.perf_counter() - t
        t = time.perf_counter()
        back = np.asarray(store.open_array("fmjoint-bench"))
        load = time.perf_counter() - t
        assert back.shape == m.shape
    return {"rows": rows, "dim": dim, "save_s": save, "load_s": load}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e4,1e5")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--sentences", type=int, default=148)
    ap.add_argument("--clusters", type=int, default=15)
    ap.add_argument("--max-ward-points", type=int, default=8000)
    ap.add_argument("--store-rows", default="1e4")
    a = ap.parse_args()
    for s in a.sizes.split(","):
        r = bench(int(float(s)), a.dim, a.sentences, a.clusters, a.max_ward_points)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
    for s in filter(None, a.store_rows.split(",")):
        r = bench_store(int(float(s)), a.dim)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}), flush=True)


if __name__ == "__main__":
    main()
