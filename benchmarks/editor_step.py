"""Seconds per denoising step of the tiny random editors, through the adapter (load_model + edit).

usage: python benchmarks/editor_step.py [--sizes 64 256] [--steps 4] [--families ...] [--device cpu]

Builds the tiny InstructPix2Pix, FLUX.1 Kontext and Qwen-Image-Edit pipelines of the test fixtures, loads
them through the registry, and times `edit()` at each square size: per step (median gap between step
callbacks, first step excluded) and the whole call (text encoding, VAE encode/decode included). The
figures show the adapter's overhead and how work grows with resolution, not real-model speed: the models
are tiny. Qwen-Image-Edit encodes its conditioning image at ~1 MP inside the pipeline whatever the output
size, which dominates its call time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fixtures_tiny.editors import (build_tiny_flux_kontext, build_tiny_instruct_pix2pix,  # noqa: E402
                                   build_tiny_qwen_image_edit)

BUILDERS = {"diffusers-instruct-pix2pix": build_tiny_instruct_pix2pix,
            "diffusers-flux-kontext": build_tiny_flux_kontext,
            "diffusers-qwen-image-edit": build_tiny_qwen_image_edit}


def time_edit(editor, size: int, steps: int, repeats: int) -> tuple[float, float]:
    from PIL import Image

    image = Image.new("RGB", (size, size), (90, 140, 200))
    per_step, totals = [], []
    for r in range(repeats + 1):  # the first call warms up
        stamps = []
        t0 = time.perf_counter()
        editor.edit(image, "make the dog a cat", seed=r, steps=steps, size=(size, size),
                    on_step=lambda i, n: stamps.append(time.perf_counter()) or True)
        total = time.perf_counter() - t0
        if r:
            per_step += [b - a for a, b in zip(stamps, stamps[1:])]
            totals.append(total)
    return statistics.median(per_step), statistics.median(totals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--families", nargs="+", default=list(BUILDERS), choices=list(BUILDERS))
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    import torch

    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}, "
          f"{args.steps} steps, median of {args.repeats} calls")
    print(f"{'family':<28} {'size':>6} {'s/step':>9} {'s/call':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families:
            folder = BUILDERS[family](tmp)
            editor = load_model(ModelSpec("editor", family, str(folder)), LoadOptions(device=args.device))
            for size in args.sizes:
                step, call = time_edit(editor, size, args.steps, args.repeats)
                print(f"{family:<28} {size:>4}px {step:>9.4f} {call:>9.3f}", flush=True)
            editor.unload()


if __name__ == "__main__":
    main()
