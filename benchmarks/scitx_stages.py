"""SciTX per-stage time for one sample on tiny random models (CPU), and a re-run of the cached sample.

    .venv/bin/python benchmarks/scitx_stages.py [--k 3] [--m 3] [--tokens 32] [--steps 4] [--size 64]

Models: a tiny timm classifier, a tiny Qwen2-VL and a tiny InstructPix2Pix, built by the test fixtures,
saved, and loaded through the real loaders. The tiny Qwen2-VL generates every reply (its cost is what is
measured), but random weights write no JSON, so for the hypothesis and edit-instruction prompts its text is
replaced by a fixed valid answer after generation; that lets the editing and scoring stages run too.

Printed: the first run's stage timings, the re-run answered from the final stored result, and a re-run
from the stored units alone (final record deleted), with their speed-ups over the first run. Then (issue 40)
the sequential model calls of one sample, each on a fresh store: one call per unit (caption_batch_size 1,
batch_requests off, edit_batch_size 1: the behaviour before batching) against the defaults (every stage
sends its work at once). On the CPU the editor batch chosen from free memory is 1, so the default run is
also shown with edit_batch_size = m (what a GPU with memory to spare picks).
"""
from __future__ import annotations

import argparse
from dataclasses import asdict
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # fixtures_tiny builders
os.environ.setdefault("HF_HUB_OFFLINE", "1")


class GeneratingJsonMLLM:
    """Runs the tiny model for every call, then substitutes valid JSON for the prompts that need it."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.info = inner.info
        self.calls = 0  # replies
        self.sequential = 0  # model calls one after another (a batch is one)

    def chat(self, messages, **kw):
        self.calls += 1
        self.sequential += 1
        return self._json(messages, self.inner.chat(messages, **kw), kw.get("seed"))

    def chat_batch(self, conversations, **kw):
        self.calls += len(conversations)
        self.sequential += 1
        return [self._json(c, r, kw.get("seed")) for c, r in zip(conversations, self.inner.chat_batch(conversations, **kw))]

    def chat_requests(self, requests):
        self.calls += len(requests)
        self.sequential += 1
        return [self._json(q.messages, r, q.seed) for q, r in zip(requests, self.inner.chat_requests(requests))]

    @staticmethod
    def _json(messages, reply, seed):
        text = "\n".join(p for m in messages for p in m.content if isinstance(p, str))
        if "cause_of_error" in text:
            return json.dumps({"cause_of_error": f"The background misleads the model (seed {seed})."})
        if "editing prompt" in text:  # one distinct instruction per hypothesis, so every edit really runs
            colour = ("red", "green", "blue", "white", "black")[sum(map(ord, text)) % 5]
            return json.dumps({"reasoning": "-", "solution": f"change the color of the background to {colour}"})
        return reply


class CountingEditor:
    """The editor as it is, counting its calls (a batch of edits is one call)."""

    def __init__(self, inner) -> None:
        self.inner, self.info, self.sequential = inner, inner.info, 0

    def __getattr__(self, name):  # preferred_size, edit_batch_capacity, ...
        return getattr(self.inner, name)

    def edit(self, *a, **kw):
        self.sequential += 1
        return self.inner.edit(*a, **kw)

    def edit_batch(self, *a, **kw):
        self.sequential += 1
        return self.inner.edit_batch(*a, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--m", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32, help="max new tokens per MLLM reply")
    ap.add_argument("--steps", type=int, default=4, help="diffusion steps per edit")
    ap.add_argument("--size", type=int, default=64, help="query and reference image side")
    args = ap.parse_args()

    import numpy as np
    import torch
    from PIL import Image

    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
    from fixtures_tiny.editors import build_tiny_instruct_pix2pix
    from fixtures_tiny.mllm import build_tiny_qwen_vl
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model
    from nemo_desktop.core.store import ResultsStore

    tmp = Path(tempfile.mkdtemp(prefix="scitx-bench-"))
    cpu = LoadOptions(device="cpu")
    t = time.perf_counter()
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{build_tiny_timm(tmp / 'timm', label_names=TINY_CLASSES, input_size=args.size)}"), cpu)
    qwen = load_model(ModelSpec("mllm", "transformers-mllm", str(build_tiny_qwen_vl(tmp, "qwen2_vl"))), cpu)
    editor = load_model(ModelSpec("editor", "diffusers-instruct-pix2pix", str(build_tiny_instruct_pix2pix(tmp))), cpu)
    print(f"built and loaded tiny models in {time.perf_counter() - t:.1f} s (torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads)")

    rng = np.random.default_rng(0)
    for c in TINY_CLASSES:
        (tmp / "ref" / c).mkdir(parents=True)
        for i in range(10):
            Image.fromarray(rng.integers(0, 255, (args.size, args.size, 3), dtype=np.uint8)).save(
                tmp / "ref" / c / f"{i}.png")
    query = tmp / "query.png"
    Image.fromarray(rng.integers(0, 255, (args.size, args.size, 3), dtype=np.uint8)).save(query)
    store = ResultsStore.open(db_path=tmp / "store" / "results.sqlite")
    t = time.perf_counter()
    index = build_index(tmp / "ref", clf, store)
    print(f"reference index: {len(index)} images in {time.perf_counter() - t:.2f} s")

    pred = int(clf.predict_proba([Image.open(query).convert("RGB")])[0].argmax())
    y = (pred + 1) % len(TINY_CLASSES)
    cfg = SciTXConfig(k=args.k, m=args.m, caption_max_new_tokens=args.tokens,
                      hypothesis_max_new_tokens=args.tokens, intervention_max_new_tokens=args.tokens,
                      edit_steps=args.steps)

    def run():
        mllm = GeneratingJsonMLLM(qwen)
        pipe = SciTXPipeline(clf, mllm, editor, store=store, reference=index, config=cfg)
        t0 = time.perf_counter()
        result = pipe(query, y)
        return result, time.perf_counter() - t0, mllm.calls

    first, t_first, calls_first = run()
    print(f"\nfirst run (k={args.k} per set, m={args.m}, {args.tokens} new tokens, {args.steps} steps, "
          f"{args.size}px): {t_first:.2f} s, {calls_first} MLLM calls, "
          f"{first.manifest['units']['computed']} units computed")
    for stage, sec in first.timings.items():
        if stage != "total":
            print(f"  {stage:<13} {sec * 1000:9.1f} ms")
    print(f"  {'total':<13} {first.timings['total'] * 1000:9.1f} ms")
    print(f"  candidates: {[round(c.cei, 2) if c.cei is not None else c.error for c in first.candidates]}")

    reps = 5
    cached = [run() for _ in range(reps)]
    t_cached = sorted(x[1] for x in cached)[reps // 2]
    assert all(x[2] == 0 for x in cached), "a cached re-run called the MLLM"
    print(f"\nre-run, final result stored:    {t_cached * 1000:8.1f} ms (median of {reps})  "
          f"-> {t_first / t_cached:7.1f}x faster, 0 MLLM calls")

    times = []
    for _ in range(reps):
        store.delete(first.result_key)
        r, sec, calls = run()
        assert calls == 0, "a re-run from units called the MLLM"
        times.append(sec)
    t_units = sorted(times)[reps // 2]
    print(f"re-run from stored units only:  {t_units * 1000:8.1f} ms (median of {reps})  "
          f"-> {t_first / t_units:7.1f}x faster, 0 MLLM calls ({r.manifest['units']['reused']} units reused)")
    store.close()

    print(f"\nsequential model calls per sample (fresh store each, k={args.k}, m={args.m}):")
    unbatched = {"caption_batch_size": 1, "batch_requests": False, "edit_batch_size": 1}
    for label, speed in (("one call per unit (before)", unbatched), ("defaults (batched)", {}),
                         (f"defaults, edit batch {args.m}", {"edit_batch_size": args.m})):
        fresh = ResultsStore.open(db_path=tmp / label.replace(" ", "_") / "results.sqlite")
        fresh_index = build_index(tmp / "ref", clf, fresh)
        mllm, counted_editor = GeneratingJsonMLLM(qwen), CountingEditor(editor)
        pipe = SciTXPipeline(clf, mllm, counted_editor, store=fresh, reference=fresh_index,
                             config=SciTXConfig(**{**asdict(cfg), "edit_size": None, **speed}))
        t0 = time.perf_counter()
        result = pipe(query, y)
        sec = time.perf_counter() - t0
        fresh.close()
        print(f"  {label:<28} MLLM {mllm.sequential:3d} calls ({mllm.calls} replies), editor "
              f"{counted_editor.sequential} calls, {sec:6.2f} s ({len(result.observations)} observations captioned, "
              f"{len(result.candidates)} candidates; explanation {result.explanation!r})")


if __name__ == "__main__":
    main()
