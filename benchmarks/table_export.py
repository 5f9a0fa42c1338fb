"""Peak memory and time of the per-image table export at 100,000 images (issue 44).

    .venv/bin/python benchmarks/table_export.py [--n 100000] [--classes 1000] [--formats parquet,csv,jsonl]

Synthetic, no real images: a CSV manifest of N paths and a consolidated reference index of the same N entries
(top-5 filled) written into a fresh results store through its documented tables, plus what the other columns read:
a competency-score result scoring every image, a failure-modes result whose hard clusters hold 10% of the images, and
200 stored explanations. (A fix is left out: its columns match images by their pixels, which needs real files.)

Each export runs in its own child process, which reports its peak resident memory (ru_maxrss) and the peak of a
child that does everything but write the rows (imports, opening the store, resolving the index, reading the stored
results into their lookups): the difference is what writing the rows costs. For scale, one more child builds the
whole table in memory with `to_pandas()`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

CHILD = r"""
import json, resource, sys, time
from nemo_desktop.core.store import ResultsStore
from nemo_desktop.core.export.table import PerImageTable
store_dir, dataset, what, target = sys.argv[1:5]
if what == "open-arrow" or target.endswith(".parquet"):
    import pyarrow.parquet  # its import alone is tens of MiB: the Parquet baseline includes it
store = ResultsStore.open(db_path=store_dir + "/results.sqlite")
t0 = time.perf_counter()
table = PerImageTable.open(store, dataset, "synthetic-classifier")
rows = 0
if what == "write":
    rows = table.write(target)["rows"]
elif what == "pandas":
    rows = len(table.to_pandas())
seconds = time.perf_counter() - t0
print(json.dumps({"rows": rows, "seconds": seconds,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build_store(folder: Path, n: int, classes: int, seed: int = 0) -> tuple[Path, Path]:
    from gui_dataset_browser import make_manifest, write_index
    from nemo_desktop.core.store import ResultsStore

    manifest = make_manifest(folder, n, classes)
    store_dir = folder / "store"
    with ResultsStore.open(db_path=store_dir / "results.sqlite") as store:
        index_id = write_index(store, manifest, n, classes, seed)
        rng = np.random.default_rng(seed)
        with store.transaction() as conn:  # top-5 of every row (write_index leaves it empty)
            rows = conn.execute("SELECT path, pred FROM index_entries WHERE index_id=?", (index_id,)).fetchall()
            conn.executemany("UPDATE index_entries SET top5=?, entropy=? WHERE index_id=? AND path=?",
                             [(json.dumps([[int(pred), 0.6]] + [[int(c), 0.1] for c in rng.integers(0, classes, 4)]),
                               1.2, index_id, p) for p, pred in rows])
        paths = [p for p, _ in rows]
        _competency(store, paths, rng)
        _failure_modes(store, index_id, manifest, paths, rng)
        _explanations(store, rows[:200])
    return store_dir, manifest


def _competency(store, paths, rng) -> None:
    items = [{"path": p, "true_index": None,
              "score": {"competency": float(c), "confidence": float(c), "id_probability": 1.0,
                        "reconstruction_loss": 0.1,
                        "loss_z_score": 0.0, "pred_index": 0, "pred_name": "class_0000"}}
             for p, c in zip(paths, rng.uniform(0, 1, len(paths)))]
    store.put("b" * 64, "competency-score", {"items": items, "threshold": 0.9, "failed": {}, "manifest": {
        "classifier": {"id": "synthetic-classifier", "family": "synthetic", "revision": "0"}}})


def _failure_modes(store, index_id, manifest, paths, rng) -> None:
    from nemo_desktop.core.analyses.failure_modes.result import FailureModesResult, GroupResult, HardCluster

    chosen = rng.choice(len(paths), len(paths) // 10, replace=False)
    clusters = [HardCluster(id=i, size=len(part), accuracy=0.1, severity=0.2, mean_score=0.5,
                            rows=[int(r) for r in part],
                            paths=[paths[r] for r in part], nearest_rows=[int(r) for r in part[:5]], confusions=[],
                            nearest_easy=None, easy_similarity=None)
                for i, part in enumerate(np.array_split(chosen, 20))]
    group = GroupResult(name="all", class_index=None, size=len(paths), accuracy=0.75, split={"hard": len(chosen)},
                        tau=0.5, tau_source="config", hard_clusters=clusters, easy_clusters=[], retrieved={})
    result = FailureModesResult(config={"methods": []}, index={"index_id": index_id, "dataset_root": str(manifest)},
                                sentences=[], groups=[group], evaluation=None, manifest={})
    store.put("a" * 64, "failure-modes", result.to_dict())


def _explanations(store, rows) -> None:
    from nemo_desktop.core.base.records import ExplanationResult, SampleInfo

    clf = {"id": "synthetic-classifier", "family": "synthetic", "revision": "0"}
    for i, (p, pred) in enumerate(rows):
        with store.transaction() as conn:
            sha = conn.execute("SELECT sha256 FROM index_entries WHERE path=?", (p,)).fetchone()[0]
        res = ExplanationResult("scitx", SampleInfo(p, sha, 0, "class_0000", int(pred), "x", 0.1, 0.6),
                                explanation="a synthetic explanation", cei=10.0,
                                manifest={"models": {"classifier": clf}})
        store.put(f"{i:064x}", "explanation", res.to_dict())


def child(store_dir: Path, dataset: Path, what: str, target: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", CHILD, str(store_dir), str(dataset), what, str(target)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--formats", default="parquet,csv,jsonl")
    ap.add_argument("--no-pandas", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        store_dir, manifest = build_store(folder, args.n, args.classes)
        print(f"synthetic store: {args.n:,} images, {args.classes} classes, built in {time.perf_counter() - t0:.1f} s")
        bases = {"plain": child(store_dir, manifest, "open", folder / "none"),
                 "arrow": child(store_dir, manifest, "open-arrow", folder / "none")}
        print(f"  opened and resolved, lookups read (no rows written): peak {bases['plain']['peak_mib']:.0f} MiB "
              f"({bases['arrow']['peak_mib']:.0f} MiB with pyarrow imported), {bases['plain']['seconds']:.1f} s")
        for fmt in args.formats.split(","):
            target = folder / f"table.{fmt}"
            base = bases["arrow" if fmt == "parquet" else "plain"]
            r = child(store_dir, manifest, "write", target)
            print(f"  {fmt:8s}: {r['rows']:,} rows in {r['seconds']:.1f} s, peak {r['peak_mib']:.0f} MiB "
                  f"(+{r['peak_mib'] - base['peak_mib']:.0f} MiB over opening), "
                  f"file {target.stat().st_size / 2**20:.1f} MiB")
        if not args.no_pandas:
            r = child(store_dir, manifest, "pandas", folder / "none")
            print(f"  to_pandas (every row in memory, for scale): {r['seconds']:.1f} s, peak {r['peak_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
