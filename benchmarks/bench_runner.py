"""Benchmark-runner throughput and the runner's own overhead per sample, against the method's time.

    .venv/bin/python benchmarks/bench_runner.py [--samples 12] [--tokens 16] [--steps 2] [--doubles 200]

Part 1, tiny models (CPU): a tiny ImageNet-R in its real layout, SciTX with a random 1000-class timm
classifier seen through the 200-class ImageNet-R protocol, a tiny Qwen2-VL as the explainer (it generates
every reply; its text is replaced by valid JSON where SciTX needs JSON, as in scitx_stages.py) and a tiny
InstructPix2Pix editor, all loaded through the real loaders; three instant judge doubles. Printed: samples per
minute, and per sample the method's time, the judges' time and the runner's own time (explanation record
copy with its artifacts, run-item write, progress), plus preparing (indexing + selection) and a resume that
finds everything done.

Part 2, runner only: an instant method double over `--doubles` samples, so nearly all the time is the
runner's: its upper bound on throughput.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "core" / "benchmark")]  # builders and doubles
os.environ.setdefault("HF_HUB_OFFLINE", "1")


class JsonFromTinyMLLM:
    """Runs the tiny model for every call, then substitutes valid JSON for the prompts that need it."""

    def __init__(self, inner) -> None:
        self.inner, self.info, self.calls = inner, inner.info, 0

    def chat(self, messages, **kw):
        self.calls += 1
        reply = self.inner.chat(messages, **kw)
        text = "\n".join(p for m in messages for p in m.content if isinstance(p, str))
        if "cause_of_error" in text:
            return json.dumps({"cause_of_error": f"The cartoon style misleads the model (seed {kw.get('seed')})."})
        if "editing prompt" in text:
            return json.dumps({"reasoning": "-", "solution": f"make it a photo, variant {sum(map(ord, text)) % 7}"})
        return reply

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


def timed(obj, name: str, bucket: dict) -> None:
    """Wrap obj.name to add its wall time to bucket[name]."""
    fn = getattr(obj, name)

    def wrapper(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            bucket[name] = bucket.get(name, 0.0) + time.perf_counter() - t

    setattr(obj, name, wrapper)


def make_dataset(root: Path, samples: int):
    from bench_world import make_imagenet_r

    classes = max(2, (samples + 1) // 2)
    return make_imagenet_r(root, classes=classes, per_class=4, wrong=2)


def run_once(config: dict, store, loader=None):
    from nemo_desktop.core.benchmark.config import parse_config
    from nemo_desktop.core.benchmark.runner import BenchmarkRunner

    runner = BenchmarkRunner(parse_config(config), store, loader=loader)
    parts: dict[str, float] = {}
    for name in ("_finalize", "_set_item", "_report", "_write_shard_record"):
        timed(runner, name, parts)
    t = time.perf_counter()
    summary = runner.run()
    return summary, time.perf_counter() - t, parts


def report(title: str, s, wall: float, parts: dict) -> None:
    n = max(1, s.computed)
    per = (s.method_s + s.judge_s + s.runner_s) / n
    print(f"\n== {title}")
    print(f"items {s.computed} in {wall:.2f} s (preparing {s.prepare_s:.2f} s): "
          f"{60.0 * s.computed / max(1e-9, wall - s.prepare_s):.1f} samples/min after preparing, "
          f"{60.0 * s.computed / wall:.1f} samples/min overall")
    print(f"per sample: {per * 1000:.1f} ms = method {1000 * s.method_s / n:.1f} ms + judges "
          f"{1000 * s.judge_s / n:.2f} ms + runner {1000 * s.runner_s / n:.2f} ms "
          f"({100 * s.runner_s / max(1e-9, s.method_s):.2f}% of the method's time)")
    print(f"loading models and building methods (once): {s.load_s:.2f} s")
    print("runner parts per sample: " + ", ".join(f"{k.strip('_')} {1000 * v / n:.2f} ms" for k, v in parts.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=12, help="misclassified samples explained with tiny models")
    ap.add_argument("--tokens", type=int, default=16, help="max new tokens per tiny-MLLM reply")
    ap.add_argument("--steps", type=int, default=2, help="diffusion steps per edit")
    ap.add_argument("--doubles", type=int, default=200, help="samples for the runner-only part (0: skip)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    from bench_world import MessyJudge, families, make_imagenet_val
    from fixtures_tiny.classifiers import build_tiny_timm
    from fixtures_tiny.editors import build_tiny_instruct_pix2pix
    from fixtures_tiny.mllm import build_tiny_qwen_vl
    from nemo_desktop.core.models import families as registry
    from nemo_desktop.core.models.families import LoadOptions, load_model
    from nemo_desktop.core.models.vocab import load_vocabulary
    from nemo_desktop.core.store import ResultsStore

    registry._ensure_builtin_families()
    for key, fn in families().items():
        registry._FAMILIES[key] = fn
    root = Path(tempfile.mkdtemp(prefix="nemo-bench-runner-"))
    t = time.perf_counter()
    timm_dir = build_tiny_timm(root / "timm", num_classes=1000, label_names=list(load_vocabulary("imagenet-1k").wnids),
                               input_size=32)
    qwen_dir = build_tiny_qwen_vl(root, "qwen2_vl")
    p2p_dir = build_tiny_instruct_pix2pix(root)
    data = make_dataset(root / "data", args.samples)
    val = make_imagenet_val(root / "data", ["n01843383", "n01910747"], per_class=4)
    print(f"built tiny models and data in {time.perf_counter() - t:.1f} s; torch threads {torch.get_num_threads()}")

    scripted = JsonFromTinyMLLM(load_model(registry.ModelSpec("mllm", "transformers-mllm", str(qwen_dir)),
                                           LoadOptions(device="cpu")))
    tokens = args.tokens

    def loader(ref):
        if ref.kind == "mllm" and ref.label == "Qwen":
            return scripted
        if ref.label.startswith("J"):
            return MessyJudge(ref.label, "fenced")
        return load_model(ref.spec(), LoadOptions(device="cpu"))

    config = {"name": "bench-runner", "seed": 0, "samples_per_dataset": args.samples,
              "imagenet_subset": {"root": str(val), "classes": "all"},
              "datasets": [{"kind": "imagenet-r", "root": str(data["root"])}],
              "classifiers": {"ViT": f"timm:local-dir:{timm_dir}"}, "mllms": {"Qwen": "test-double:scripted"},
              "editors": {"IP2P": f"diffusers-instruct-pix2pix:{p2p_dir}"},
              "methods": [{"label": "SciTX", "method": "scitx",
                           "options": {"k": 1, "m": 2, "edit_steps": args.steps, "caption_max_new_tokens": tokens,
                                       "hypothesis_max_new_tokens": tokens, "intervention_max_new_tokens": tokens}}],
              "judges": {"J1": "test-double:judge-a-fenced", "J2": "test-double:judge-b-fenced",
                         "J3": "test-double:judge-c-fenced"}}
    store = ResultsStore.open(db_path=root / "store" / "results.sqlite")
    s, wall, parts = run_once(config, store, loader)
    report(f"tiny models: SciTX (k=1, m=2, {tokens} tokens, {args.steps} steps), {s.computed} samples", s, wall, parts)
    if s.stage_s:
        stages = {k: v for k, v in s.stage_s.items() if k != "total"}
        print("method stages per sample: " + ", ".join(f"{k} {1000 * v / max(1, s.computed):.0f} ms"
                                                      for k, v in sorted(stages.items(), key=lambda kv: -kv[1])))
    s2, wall2, _ = run_once(config, store, loader)
    print(f"resume with everything done: {wall2:.2f} s for {s2.total} items (preparing {s2.prepare_s:.2f} s, "
          f"{s2.computed} processed)")
    store.close()

    if args.doubles:
        from bench_world import FixedConfig, FixedExplainer, make_imagenet_r
        from nemo_desktop.core.registry import methods as methods

        methods._ensure_builtin()
        methods._METHODS["fixed"] = methods.MethodEntry("fixed", FixedExplainer, FixedConfig, "test double", False)
        classes = max(2, min(200, args.doubles))
        wrong = -(-args.doubles // classes)
        big = make_imagenet_r(root / "big", classes=classes, per_class=wrong + 1, wrong=wrong)
        cfg = dict(config, samples_per_dataset=args.doubles,
                   datasets=[{"kind": "imagenet-r", "root": str(big["root"])}],
                   classifiers={"ViT": "test-double:coded-imagenet"},
                   methods=[{"label": "Fixed", "method": "fixed"}])
        cfg.pop("imagenet_subset")
        store = ResultsStore.open(db_path=root / "store2" / "results.sqlite")
        s, wall, parts = run_once(cfg, store)
        report(f"runner only: instant method double, {s.computed} samples, 3 instant judges", s, wall, parts)
        s2, wall2, _ = run_once(cfg, store)
        print(f"resume with everything done: {wall2:.2f} s for {s2.total} items (preparing {s2.prepare_s:.2f} s, "
              f"{s2.computed} processed)")
        store.close()


if __name__ == "__main__":
    main()
