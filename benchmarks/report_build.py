"""Time to build a run report of many samples, as HTML and as PDF (target: <= 30 s each for 200 samples).

usage: python benchmarks/report_build.py [--samples 200] [--methods 1] [--images jpeg|png] [--dir DIR] [--keep]

Fills a temporary results store with realistic diagnoses (224 px photo crops from scikit-learn's bundled
sample photos as inputs, counterfactuals, Grad-CAM overlays and observation thumbnails; 3 candidates and 9
observations per diagnosis; sentences of model-like length), then times, separately: building the report
model from the store, rendering HTML, rendering PDF. Filling the store is not timed. Prints one line per
figure plus the output sizes and page count.
"""
from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, Observation, SampleInfo
from nemo_desktop.core.reports import build_run_report, render_html, render_pdf
from nemo_desktop.core.store import ResultsStore, content_hash, result_key

HYPOTHESIS = ("The image is a pencil sketch with strong hatching on the animal's flank; the classifier may "
              "read the hatching as the stripes of a tiger rather than the fur of a tabby cat.")
INSTRUCTION = "Turn the pencil sketch into a colour photograph of the same cat, keeping its pose and framing."
CAPTION = "A grey tabby cat lying on a wooden floor next to a window, photographed from slightly above."


class Photos:
    """Every call gives a different 224 px crop of a real photo, as a real dataset would."""

    def __init__(self, rng: np.random.Generator):
        from sklearn.datasets import load_sample_images

        self.photos = [Image.fromarray(a) for a in load_sample_images().images]
        self.rng = rng

    def __call__(self) -> Image.Image:
        p = self.photos[int(self.rng.integers(len(self.photos)))]
        side = int(self.rng.integers(160, 420))
        x, y = int(self.rng.integers(0, p.width - side)), int(self.rng.integers(0, p.height - side))
        return p.crop((x, y, x + side, y + side)).resize((224, 224), Image.Resampling.BILINEAR)


def fill(store: ResultsStore, samples: int, methods: list[str]) -> str:
    rng = np.random.default_rng(0)
    photo = Photos(rng)
    run_id = store.create_run("bench", {"dataset": "imagenet-r", "classifier": "vit_b16",
                                        "global_explanation": "Renditions such as sketches confuse the model."})
    for i in range(samples):
        inp = photo()
        for m, method in enumerate(methods):
            arts = {"input": inp, "gradcam": inp.filter(ImageFilter.GaussianBlur(6)),
                    **{f"edit{j}": photo() for j in range(3)}, **{f"obs{k}": photo() for k in range(9)}}
            cands = []
            for j in range(3):
                before, after = 0.12, float(np.clip(0.12 + rng.normal(0.1, 0.15), 0, 1))
                cands.append(Candidate(HYPOTHESIS, "image", INSTRUCTION, f"edit{j}", before, after,
                                       100 * (after - before),
                                       [ClassScore(292, "tiger", 0.6), ClassScore(281, "tabby cat", 0.12)],
                                       [ClassScore(281, "tabby cat", after), ClassScore(292, "tiger", 0.3)]))
            best = max(range(3), key=lambda j: cands[j].cei)
            obs = [Observation("ABC"[k // 3], f"/refs/{k}.jpg", "0" * 64, 281, "tabby cat", 0.8, CAPTION,
                               f"obs{k}") for k in range(9)]
            r = ExplanationResult(method, SampleInfo(f"/data/imagenet-r/sketch_{i:04d}.png", content_hash(inp), 281,
                                                     "tabby cat", 292, "tiger", 0.12, 0.6,
                                                     [ClassScore(292, "tiger", 0.6)], "input"),
                                  HYPOTHESIS, best, cands[best].cei, cands, obs, {"gradcam": "gradcam"},
                                  {"observation": 1.2, "hypothesis": 6.5, "experiment": 21.0},
                                  {"models": {"mllm": {"id": "Qwen/Qwen2.5-VL-7B-Instruct", "revision": "a1b2c3"}},
                                   "seed": 1234, "date": "2026-11-21"})
            key = result_key("explanation", i=i, method=method)
            r.result_key = key
            store.put(key, "explanation", {**r.to_dict(), "llm_match": float(rng.choice([0, 0.5, 1]))}, arts)
            store.add_run_item(run_id, f"{method}/{i}", key, "done")
    return run_id


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--methods", type=int, default=1, help="methods per sample (each a full diagnosis)")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--images", choices=("jpeg", "png"), default="jpeg", help="image encoding (run default: jpeg)")
    ap.add_argument("--keep", action="store_true", help="keep the reports in the current folder")
    args = ap.parse_args()
    methods = ["scitx", "cam-mllm", "change-mllm", "error-retrieval"][:args.methods]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = ResultsStore.open(db_path=Path(tmp) / "results.sqlite")
        t = time.perf_counter()
        run_id = fill(store, args.samples, methods)
        print(f"store filled (not timed): {args.samples} samples x {len(methods)} method(s) "
              f"in {time.perf_counter() - t:.1f} s")

        # Wall and CPU seconds (CPU sums the image threads): on a shared machine wall time includes waiting.
        clock = lambda: (time.perf_counter(), time.process_time())  # noqa: E731
        c0 = clock()
        doc = build_run_report(run_id, store, image_format=args.images)
        c1 = clock()
        html = render_html(doc).encode("utf-8")
        c2 = clock()
        pdf = render_pdf(doc)
        c3 = clock()
        pages = len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf))
        span = lambda a, b: f"{b[0] - a[0]:6.2f} s wall, {b[1] - a[1]:6.2f} s CPU"  # noqa: E731
        print(f"build report model:    {span(c0, c1)}  ({len(list(doc.iter_images()))} {args.images} images)")
        print(f"render HTML:           {span(c1, c2)}  ({len(html) / 2**20:.1f} MiB)")
        print(f"render PDF:            {span(c2, c3)}  ({len(pdf) / 2**20:.1f} MiB, {pages} pages)")
        print(f"HTML report, total:    {c2[0] - c0[0]:6.2f} s wall (target <= 30 s)")
        print(f"PDF report, total:     {c1[0] - c0[0] + c3[0] - c2[0]:6.2f} s wall (target <= 30 s)")
        if args.keep:
            Path(f"report-{args.samples}.html").write_bytes(html)
            Path(f"report-{args.samples}.pdf").write_bytes(pdf)
        store.close()


if __name__ == "__main__":
    main()
