"""Classifier throughput: the NEMO adapter versus the raw model forward, and image decode + preprocess.

A timm model with random weights (default resnet18, 224 px) is saved with `timm.models.save_for_hf` and
loaded through the real registry path (`load_model(ModelSpec("classifier", "timm", "local-dir:..."))`).
On the SAME preprocessed batch tensor, in the same run, interleaved, it times
  raw      `model(x)` under torch.inference_mode (what any script would do),
  adapter  `classifier.predict_proba_from_pixels(x)` (inference mode, OOM guard, softmax, numpy copy),
and reports the throughput ratio adapter/raw (target >= 0.9). Separately it times decoding JPEG files with
`nemo_desktop.core.base.images.load_image` and the model's own preprocessing (`classifier.preprocess`).

    .venv/bin/python benchmarks/classifier_throughput.py [--device cpu] [--batch 32] [--repeats 10]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _images(folder: Path, count: int, seed: int = 0) -> list[Path]:
    """Photo-like JPEGs (smooth gradients + noise, 500x375 like ImageNet's median) written to `folder`."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:375, 0:500]
    paths = []
    for i in range(count):
        base = np.stack([(xx * rng.uniform(0.2, 0.6) + yy * rng.uniform(0.1, 0.4) + rng.uniform(0, 255)) % 255
                         for _ in range(3)], axis=-1)
        pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype("uint8")
        path = folder / f"img{i:03d}.jpg"
        Image.fromarray(pixels).save(path, quality=90)
        paths.append(path)
    return paths


def _time(fn, sync) -> float:
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--images", type=int, default=64, help="JPEG files for the decode + preprocess timing")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import timm
    import torch

    from nemo_desktop.core.base.images import load_image
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        torch.manual_seed(0)
        timm.models.save_for_hf(timm.create_model(args.arch, pretrained=False), str(tmp / "model"),
                                safe_serialization=True)
        clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{tmp / 'model'}"),
                         LoadOptions(device=args.device, dtype=args.dtype))
        paths = _images(tmp, args.images)

        # decode + preprocess (CPU work, done once per image in every pipeline)
        t_decode = _time(lambda: [load_image(p) for p in paths], sync)
        decoded = [load_image(p) for p in paths]
        t_pre = min(_time(lambda: clf.preprocess(decoded), sync) for _ in range(3))
        t_both = _time(lambda: clf.preprocess([load_image(p) for p in paths]), sync)

        # model throughput on one fixed batch tensor
        x = clf.preprocess((decoded * (args.batch // len(decoded) + 1))[:args.batch])
        model = clf.model

        def raw():
            with torch.inference_mode():
                model(x)

        def adapter():
            clf.predict_proba_from_pixels(x)

        for _ in range(3):  # warm-up (allocator, kernels)
            raw()
            adapter()
        t_raw, t_adapter = [], []
        for i in range(args.repeats):  # interleaved, alternating order: drift hits both equally
            pair = (raw, adapter) if i % 2 == 0 else (adapter, raw)
            for fn in pair:
                (t_raw if fn is raw else t_adapter).append(_time(fn, sync))
        med_raw, med_adapter = statistics.median(t_raw), statistics.median(t_adapter)
        min_raw, min_adapter = min(t_raw), min(t_adapter)
        t_end_to_end = _time(lambda: clf.predict_proba(decoded[:args.batch]), sync)
        # what the adapter adds on top of the forward (softmax, float32, copy to numpy), timed alone: a
        # noise-free bound on the ratio when the machine is busy and the interleaved medians wobble
        with torch.inference_mode():
            logits = model(x)
        t_extra = min(_time(lambda: torch.softmax(logits.float(), dim=-1).cpu().numpy(), sync) for _ in range(20))

    n = len(paths)
    figures = {
        "arch": args.arch, "device": args.device, "dtype": args.dtype, "batch": args.batch,
        "input_size": list(clf.data_config["input_size"]), "torch_threads": torch.get_num_threads(),
        "raw_forward_img_per_s": args.batch / med_raw, "adapter_img_per_s": args.batch / med_adapter,
        "adapter_over_raw": med_raw / med_adapter, "adapter_over_raw_best": min_raw / min_adapter,
        "raw_batch_ms_median": 1000 * med_raw, "adapter_batch_ms_median": 1000 * med_adapter,
        "adapter_extra_ms_per_batch": 1000 * t_extra, "adapter_over_raw_bound": min_raw / (min_raw + t_extra),
        "decode_img_per_s": n / t_decode, "preprocess_img_per_s": n / t_pre,
        "decode_plus_preprocess_img_per_s": n / t_both,
        "predict_proba_end_to_end_img_per_s": min(args.batch, n) / t_end_to_end,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{args.arch} ({'x'.join(map(str, figures['input_size']))}), device {args.device}, {args.dtype}, "
              f"batch {args.batch}, {figures['torch_threads']} torch threads, {args.repeats} interleaved repeats")
        print(f"  raw model forward        {figures['raw_forward_img_per_s']:8.1f} img/s  "
              f"(median {figures['raw_batch_ms_median']:.1f} ms/batch)")
        print(f"  adapter predict_proba    {figures['adapter_img_per_s']:8.1f} img/s  "
              f"(median {figures['adapter_batch_ms_median']:.1f} ms/batch)")
        verdict = "OK" if figures["adapter_over_raw"] >= 0.9 else "BELOW TARGET"
        print(f"  adapter / raw            {figures['adapter_over_raw']:8.3f}       (medians; best-of-{args.repeats}: "
              f"{figures['adapter_over_raw_best']:.3f}; target >= 0.9: {verdict})")
        print(f"  adapter's own work       {figures['adapter_extra_ms_per_batch']:8.3f} ms/batch "
              f"(softmax + numpy copy; bound on the ratio: {figures['adapter_over_raw_bound']:.4f})")
        print(f"  JPEG decode (load_image) {figures['decode_img_per_s']:8.1f} img/s  (500x375, {n} files)")
        print(f"  preprocess (timm config) {figures['preprocess_img_per_s']:8.1f} img/s")
        print(f"  decode + preprocess      {figures['decode_plus_preprocess_img_per_s']:8.1f} img/s")
        print(f"  predict_proba end to end {figures['predict_proba_end_to_end_img_per_s']:8.1f} img/s  "
              "(decoded images in, probabilities out)")
    return 0 if figures["adapter_over_raw"] >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
