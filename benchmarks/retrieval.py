"""Observation-retrieval latency per query, and reference-index build throughput.

usage: python benchmarks/retrieval.py [--sizes 1e4,1e5,1e6] [--dim 768] [--classes 1000] [--queries 30]
                                      [--dtypes float32,float16] [--device cpu] [--dir DIR]
                                      [--load-sizes 1e5,1e6] [--skip-retrieval] [--skip-build]

Retrieval: random unit vectors (float32 or float16) in a memory-mapped .npy on disk, laid out like a real
index (correctly classified rows first, each part sorted by class; 80% correct), 1000 classes. Each query asks for
K=3 per set. Two modes:
  * "SciTX"    - class relevance on (sets A, B, C): reads the two classes' slices plus a random draw;
  * "ablation" - class relevance off (set S of 6 nearest + C): an exact scan of every correct row.
Latencies are for a warm page cache (the file was read once first); the first query also builds the
content-hash lookup used to exclude the query image, timed separately.

Load: `ReferenceIndex.load` of an index of N entries from the results store.

Build: `build_index` on scikit-learn's 1,797 digits rendered to 32x32 PNGs with the tests' digits-MLP
classifier (tests/fixtures_tiny/digits_classifier.py): first build, a no-op re-run, and a re-run after 1%
of the files changed.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from nemo_desktop.core.data.index_files import consolidate
from nemo_desktop.core.data.reference_index import IndexEntries, ReferenceIndex
from nemo_desktop.core.data.retrieval import retrieve_observations

ROOT = Path(__file__).resolve().parents[1]


def write_unit_vectors(path: Path, n: int, dim: int, dtype: str, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n, dim))
    step = 65536
    for s in range(0, n, step):
        block = rng.standard_normal((min(step, n - s), dim), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[s:s + len(block)] = block
    out.flush()
    del out


def synthetic_index(features: np.ndarray, classes: int, seed: int = 0) -> ReferenceIndex:
    n = len(features)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    correct = rng.random(n) < 0.8
    order = np.lexsort((labels, ~correct))  # the index's layout: correct rows first, by class
    labels, correct = labels[order], correct[order]
    preds = np.where(correct, labels, (labels + 1) % classes)
    entries = IndexEntries(np.array([f"/refs/{i:07d}.png" for i in range(n)], object),
                           np.array([hashlib.sha256(b"%d" % i).hexdigest() for i in range(n)], object),
                           labels.astype(np.int64),
                           preds.astype(np.int64), np.ones(n, np.float32), np.ones(n, np.float32), correct)
    return ReferenceIndex("bench", [f"class {i}" for i in range(classes)], entries, features)


def warm(features: np.ndarray) -> float:
    t = time.perf_counter()
    for s in range(0, len(features), 262144):
        float(np.asarray(features[s:s + 262144], np.float32).sum())
    return time.perf_counter() - t


def ms(values: list[float]) -> str:
    v = sorted(values)
    p90 = v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]
    return f"median {statistics.median(v) * 1e3:8.1f} ms   p90 {p90 * 1e3:8.1f} ms   max {v[-1] * 1e3:8.1f} ms"


def bench_retrieval(args) -> None:
    tmpdir = tempfile.mkdtemp(dir=args.dir, prefix="nemo-retrieval-bench-")
    print(f"retrieval: {args.dim} dims, {args.classes} classes, K=3 per set, {args.queries} queries, "
          f"device {args.device}, matrices in {tmpdir}")
    try:
        for n in args.sizes:
            for dtype in args.dtypes:
                path = Path(tmpdir) / f"features_{n}_{args.dim}_{dtype}.npy"
                t = time.perf_counter()
                write_unit_vectors(path, n, args.dim, dtype)
                t_write = time.perf_counter() - t
                features = np.load(path, mmap_mode="r")
                index = synthetic_index(features, args.classes)
                t_warm = warm(features)
                size_gb = path.stat().st_size / 1e9
                print(f"\nN = {n:>9,d} x {args.dim} {dtype} ({size_gb:.2f} GB on disk; written in {t_write:.1f} s, "
                      f"first full read {t_warm:.2f} s)")
                rng = np.random.default_rng(1)
                queries = rng.standard_normal((args.queries + 1, args.dim)).astype(np.float32)
                pairs = [rng.choice(args.classes, 2, replace=False).tolist() for _ in range(args.queries + 1)]
                shas = [hashlib.sha256(b"query %d" % i).hexdigest() for i in range(args.queries + 1)]
                t = time.perf_counter()
                retrieve_observations(index, queries[0], *pairs[0], query_sha256=shas[0], device=args.device)
                print(f"  first query (builds the content-hash lookup once): {(time.perf_counter() - t) * 1e3:8.1f} ms")
                for label, relevance in (("SciTX   (A+B+C, class relevance)", True),
                                         ("ablation (S+C, exact full scan) ", False)):
                    times = []
                    for q, (y, y_hat), sha in zip(queries[1:], pairs[1:], shas[1:]):
                        t = time.perf_counter()
                        res = retrieve_observations(index, q, y, y_hat, class_relevance=relevance,
                                                    query_sha256=sha, device=args.device)
                        times.append(time.perf_counter() - t)
                        assert res.observations, res.notes
                    print(f"  {label}: {ms(times)}")
                del index, features
                path.unlink()
    finally:
        for p in Path(tmpdir).glob("*"):
            p.unlink()
        os.rmdir(tmpdir)


def bench_load(args) -> None:
    """ReferenceIndex.load from the store: the entries table read into arrays, the matrix memory-mapped."""
    import json

    from nemo_desktop.core.store import ResultsStore

    print("\nindex load (ReferenceIndex.load: entries -> arrays, matrix memory-mapped)")
    for n in args.load_sizes:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            store = ResultsStore.open(db_path=Path(tmp) / "results.sqlite")
            labels = np.sort(np.random.default_rng(0).integers(0, args.classes, n))
            with store.transaction() as conn:  # the rows a finished build leaves (see reference_index.py)
                conn.execute("INSERT INTO indexes VALUES (?,?,?,?,?,?,?,?,?,?)",
                             ("bench", "/refs", "bench-model", None, json.dumps([f"c{i}" for i in range(args.classes)]),
                              args.dim, "index-bench-m", 0.0, 0.0, json.dumps({"version": 0, "next_row": n})))
                conn.executemany("INSERT INTO index_entries VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                                 (("bench", f"/refs/{i:07d}.png", hashlib.sha256(b"%d" % i).hexdigest(), int(lab),
                                   int(lab), 0.9, 0.9, 1, i, "[[0, 0.9]]", 1.0, 100) for i, lab in enumerate(labels)))
            store.arrays_dir.mkdir(exist_ok=True)
            np.lib.format.open_memmap(store.array_path("index-bench-m"), mode="w+", dtype=np.float32,
                                      shape=(n, args.dim)).flush()
            t = time.perf_counter()
            index = ReferenceIndex.load(store, "bench")
            t_rows = time.perf_counter() - t
            del index
            t = time.perf_counter()
            consolidate(store, "bench", remove_orphans=True)  # what every build ends with: writes the sidecar
            t_side = time.perf_counter() - t
            t = time.perf_counter()
            index = ReferenceIndex.load(store, "bench")
            dt = time.perf_counter() - t
            t = time.perf_counter()
            index.rows_with_sha("0" * 64)
            print(f"  N = {n:>9,d}: load {dt:6.2f} s (from the SQLite rows: {t_rows:.2f} s; writing the entries "
                  f"sidecar {t_side:.2f} s); content-hash lookup on the first query {time.perf_counter() - t:5.2f} s")
            del index
            store.close()


def bench_build(args) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays, write_digit_folder

    from nemo_desktop.core.data.datasets import FolderDataset
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.store import ResultsStore

    X, y = load_digits_arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = DigitsMLPClassifier.train(X, y)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        paths = write_digit_folder(Path(tmp) / "digits", X, y)
        store = ResultsStore.open(db_path=Path(tmp) / "store" / "results.sqlite")
        print(f"\nindex build: {len(paths)} digit PNGs (32x32), digits-MLP test classifier (hidden 32), batch 32")
        t = time.perf_counter()
        index = build_index(FolderDataset(Path(tmp) / "digits"), clf, store, batch_size=32)
        dt = time.perf_counter() - t
        print(f"  first build      : {dt:6.2f} s  = {len(index) / dt:7.0f} images/s")
        # where the time goes, per image: decode + sha256 vs the classifier's pass (what indexing calls)
        from nemo_desktop.core.base.images import load_image
        from nemo_desktop.core.models.outputs import predict_with_embeddings
        from nemo_desktop.core.store.keys import content_hash
        t = time.perf_counter()
        images = [load_image(p) for p in paths[:500]]
        _ = [content_hash(p) for p in paths[:500]]
        t_io = (time.perf_counter() - t) / 500
        t = time.perf_counter()
        predict_with_embeddings(clf, images)
        t_model = (time.perf_counter() - t) / 500
        print(f"    per image: decode+hash {t_io * 1e3:.2f} ms, classifier {t_model * 1e3:.2f} ms, "
              f"rest (store, chunks, matrix) {(dt / len(index) - t_io - t_model) * 1e3:.2f} ms")
        t = time.perf_counter()
        index = build_index(FolderDataset(Path(tmp) / "digits"), clf, store)
        print(f"  no-op re-run     : {time.perf_counter() - t:6.2f} s  (processed {index.last_build.processed})")
        for p in paths[::100]:
            os.utime(p, (1e9, 1e9))  # touched only: hashed, not re-classified
        for i, p in enumerate(paths[50::100]):
            from fixtures_tiny.digits_classifier import render_digit
            render_digit(X[(i * 7) % len(X)]).save(p)
        t = time.perf_counter()
        index = build_index(FolderDataset(Path(tmp) / "digits"), clf, store)
        print(f"  re-run, 1% touched + 1% changed: {time.perf_counter() - t:6.2f} s  "
              f"(processed {index.last_build.processed})")
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e4,1e5,1e6")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--dtypes", default="float32", help="comma-separated: float32, float16")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda when a GPU is present")
    ap.add_argument("--dir", default=None, help="where the temporary matrices go (default: the temp dir)")
    ap.add_argument("--load-sizes", default="1e5,1e6", help="index sizes for the load benchmark ('' to skip)")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--skip-retrieval", action="store_true")
    args = ap.parse_args()
    args.sizes = [int(float(s)) for s in args.sizes.split(",")]
    args.dtypes = args.dtypes.split(",")
    args.load_sizes = [int(float(s)) for s in args.load_sizes.split(",") if s]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    if not args.skip_retrieval:
        bench_retrieval(args)
    if args.load_sizes:
        bench_load(args)
    if not args.skip_build:
        bench_build(args)


if __name__ == "__main__":
    main()
