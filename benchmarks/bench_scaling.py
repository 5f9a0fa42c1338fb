"""Scaling of `nemo bench run --ray` over 1, 2 and 4 local Ray workers: samples/min and efficiency.

    .venv/bin/python benchmarks/bench_scaling.py [--samples 24] [--judge-delay 0.25] [--workers 1,2,4]

The same small benchmark each time, into a fresh store: a tiny ImageNet-R in its real layout, the coded
classifier double, the method double ('fixed', two method rows) waiting `--delay` seconds per item in place
of a model's time (it sleeps, so it costs no CPU: on a small machine this measures the Ray backend's
orchestration, not GPU compute), and two instant judge doubles. One local Ray cluster with
as many CPU slots as the largest worker count is started once (its start is not counted).

Printed per worker count: wall time of the whole run (actors starting, every shard preparing its index and
selection, the samples, the merge), samples/min (items: sample x method) over that wall time, and the scaling
efficiency (rate / (workers x rate with 1 worker)); then the same for the samples phase alone (the slowest
shard's run less its preparation). The per-shard preparation is repeated in every shard, so it bounds
the efficiency of short runs.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_TESTS = ROOT / "tests" / "core" / "benchmark"
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(BENCH_TESTS)]  # builders and doubles
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only: a local cluster


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=24, help="misclassified samples selected (items = 2 x this)")
    ap.add_argument("--delay", type=float, default=0.25, help="seconds per item of the method double (a model's time)")
    ap.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]

    import ray
    from bench_world import make_imagenet_r, make_imagenet_val, register_doubles

    from nemo_desktop.core.benchmark.config import parse_config
    from nemo_desktop.core.benchmark.ray_backend import RayBenchmark
    from nemo_desktop.core.benchmark.records import DONE
    from nemo_desktop.core.store import ResultsStore

    register_doubles()  # the driver parses the config, which names method 'fixed'
    root = Path(tempfile.mkdtemp(prefix="nemo-scaling-"))
    classes = max(2, min(200, args.samples // 2))
    wrong = -(-args.samples // classes)
    data = make_imagenet_r(root / "data", classes=classes, per_class=wrong + 1, wrong=wrong)
    val = make_imagenet_val(root / "data", ["n01843383", "n01910747"], per_class=2)
    cfg = {"name": "scaling", "seed": 0, "samples_per_dataset": args.samples,
           "imagenet_subset": {"root": str(val), "classes": "mini-imagenet"},
           "datasets": [{"kind": "imagenet-r", "root": str(data["root"])}],
           "classifiers": {"ViT": "test-double:coded-imagenet"}, "mllms": {"Qwen": "test-double:scripted"},
           "editors": {"Kontext": "test-double:restoring"},
           "methods": [{"label": "Fixed", "method": "fixed", "options": {"delay": args.delay}},
                       {"label": "Fixed+V", "method": "fixed", "options": {"validate": True, "delay": args.delay}}],
           "judges": {"GPT": "test-double:judge-gpt-fenced", "Claude": "test-double:judge-claude-fraction"}}
    config = parse_config(cfg)

    t = time.perf_counter()
    paths = os.pathsep.join([str(ROOT), str(ROOT / "tests"), str(BENCH_TESTS), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=max(counts), include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": paths, "HF_HUB_OFFLINE": "1"},
                          "worker_process_setup_hook": "bench_world.register_doubles"})
    print(f"Ray local cluster with {max(counts)} CPU slots started in {time.perf_counter() - t:.1f} s "
          f"({os.cpu_count()} cores on this machine); {args.samples} samples x 2 methods, "
          f"{args.delay:g} s per item.")
    rows = []
    for n in counts:
        where = root / f"store-{n}"
        store = ResultsStore.open(db_path=where / "results.sqlite", artifacts_dir=where / "artifacts")
        t = time.perf_counter()
        backend = RayBenchmark(config, store, workers=n, poll_s=0.2)
        s = backend.run()
        wall = time.perf_counter() - t
        assert s.statuses == {DONE: s.total}, s.statuses
        store.close()
        # The samples phase: the slowest shard's run time less its preparation (index + selection).
        phase = max(st.summary["seconds"] - st.summary["prepare_s"] for st in backend.shards)
        rows.append((n, s.total, wall, 60.0 * s.total / wall, phase, 60.0 * s.total / phase))
    base, base_phase = rows[0][3] / rows[0][0], rows[0][5] / rows[0][0]
    print(f"{'workers':>7} {'items':>5} {'wall s':>7} {'samples/min':>11} {'efficiency':>10} | "
          f"{'samples phase s':>15} {'samples/min':>11} {'efficiency':>10}")
    for n, total, wall, rate, phase, prate in rows:
        print(f"{n:>7} {total:>5} {wall:>7.1f} {rate:>11.1f} {rate / (n * base):>10.2f} | "
              f"{phase:>15.1f} {prate:>11.1f} {prate / (n * base_phase):>10.2f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
