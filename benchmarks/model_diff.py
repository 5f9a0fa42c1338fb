"""Model differences (seed 002): LLM calls and wall time per Optimization iteration and in total for the demo
(`nemo compare demo`) with an instant LLM double, and the per-condition difference throughput relative to the
two classifiers' raw forward on the same images.

usage: python benchmarks/model_diff.py [--test-conditions 100] [--samples 20] [--iterations 10]
                                       [--throughput-conditions 100] [--seed 0]

The double answers instantly and without reading meaning: the evaluator by a hash of the prompt, the explainer
with a fixed sentence varied by its seed, the explorer with random grid conditions (one out of range, as real
LLMs do). So the figures are the application's own cost (rendering, classifying, prompting, caching, storing),
the floor under any real LLM. The demo's two CNNs are trained first (timed). Everything runs in a fresh
temporary results store.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

from nemo_desktop.core.analyses.model_diff import ModelDiffConfig
from nemo_desktop.core.analyses.model_diff.demo import (
    demo_models,
    demo_source,
    to_tensor,
)
from nemo_desktop.core.analyses.model_diff.labels import match_labels
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.models.protocols import ModelInfo
from nemo_desktop.core.registry import Components, build_analysis
from nemo_desktop.core.store import ResultsStore


class InstantLLM:
    """Explainer and evaluator in one, answering in microseconds (see the module docstring)."""

    info = ModelInfo("bench:instant-llm", "bench", "1")

    def __init__(self, grid):
        self.grid, self.calls = grid, 0

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **_):
        self.calls += 1
        text = messages[-1].content[0]
        if "Now, let's start the evaluation." in text:
            return ("[1] Model A", "[2] Model B", "[3] Cannot be determined")[hashlib.sha256(text.encode()).digest()[0] % 3]
        explanation = f"Model A is worse than model B for the digits {seed % 10 if seed else 0} and 3."
        if "exploring further conditions" in text:
            k = int(re.search(r"Please provide (\d+) different conditions", text).group(1))
            rng = random.Random(seed)
            items = [{"strategy": "exploration", "condition": {a.name: rng.choice(a.values) for a in
                                                               self.grid.attributes}} for _ in range(k)]
            return json.dumps(items + [{"strategy": "exploration", "condition": {"digit": 3, "color": "teal"}}])
        if "Your role:" in text:
            return f'"feedback": "Add the colours.", "explanation": {json.dumps(explanation)}'
        return json.dumps({"explanation": explanation})

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


def demo_run(args) -> None:
    t0 = time.perf_counter()
    a, b = demo_models(seed=args.seed)
    train_s = time.perf_counter() - t0
    source = demo_source()
    llm = InstantLLM(source.space)
    config = ModelDiffConfig(samples_per_condition=args.samples, iterations=args.iterations,
                             test_conditions=args.test_conditions, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp, ResultsStore.open(db_path=Path(tmp) / "results.db") as store:
        pipe = build_analysis("model-diff", Components(classifier=a, classifier_b=b, mllm=llm, generator=source,
                                                       store=store), config)
        t1 = time.perf_counter()
        result = pipe(JobContext())
        total_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        build_analysis("model-diff", Components(classifier=a, classifier_b=b, mllm=llm, generator=source,
                                                store=store), config)(JobContext())
        rerun_s = time.perf_counter() - t2
    print(f"Demo: two CNNs trained in {train_s:.1f} s; m = {args.samples}, T = {args.iterations}, k = 10, beam 3, "
          f"{args.test_conditions or 1300} held-out conditions")
    print(f"{'t':>3} {'explored':>9} {'|C_t|':>6} {'LLM calls':>10} {'evaluator calls':>16} {'seconds':>8}")
    for r in result.iterations:
        valid = sum(e.valid for e in r.explored)
        print(f"{r.t:>3} {f'{valid}/{len(r.explored)}':>9} {r.n_conditions:>6} {r.llm_calls:>10} "
              f"{r.evaluator_calls:>16} {r.seconds:>8.2f}")
    calls = result.manifest["calls"]
    print(f"total: {total_s:.1f} s; explainer calls {calls['explainer']}, evaluator calls {calls['evaluator']}, "
          f"images classified {calls['classified_images']} (by each model)")
    print("stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items()))
    print(f"re-run answered from the store in {rerun_s:.2f} s")


def throughput(args) -> None:
    a, b = demo_models(seed=args.seed)
    source = demo_source()
    conds = source.space.sample(args.throughput_conditions, seed=args.seed + 1)
    match = match_labels(a.class_names, b.class_names, source.space.class_labels())
    from nemo_desktop.core.analyses.model_diff.cache import UnitMemo
    from nemo_desktop.core.analyses.model_diff.differences import DifferenceMeter

    meter = DifferenceMeter(a, b, source, match, m=args.samples, seed=args.seed, memo=UnitMemo(None),
                            key_parts={"bench": 1})
    t0 = time.perf_counter()
    for c in conds:
        meter.measure(c)
    measure_s = time.perf_counter() - t0
    images = [[im for im, _ in source.sample(c, args.samples, args.seed)] for c in conds]
    t1 = time.perf_counter()
    for ims in images:
        x = to_tensor(ims)
        import torch

        with torch.no_grad():
            a.net(x), b.net(x)
    raw_s = time.perf_counter() - t1
    n = len(conds) * args.samples
    print(f"Per-condition differences: {len(conds)} conditions x {args.samples} images = {n} images: "
          f"{n / measure_s:.0f} images/s ({measure_s / len(conds) * 1000:.1f} ms per condition, rendering included); "
          f"raw forward of both CNNs on the same images: {n / raw_s:.0f} images/s; ratio {raw_s / measure_s:.2f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--test-conditions", type=int, default=100)
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--throughput-conditions", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    demo_run(args)
    throughput(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
