"""Competency: generator speed and success on the digits world, and scoring throughput vs a classifier forward.

Part 1 (the digits world of tests/fixtures_tiny/competency_world.py: a small CNN on sklearn's digits, digit 9 held out)
fits an estimator, takes N low-competency images (unseen nines, noisy and pixelated digits) and runs the
five generators with the seed's defaults, printing seconds per image and success rate per generator (the
shape of the seed's Table 1, timing and success columns).

Part 2 loads a timm model with random weights (default resnet18, 224 px) through the real registry path,
builds an estimator with the default autoencoder (64 px, random weights: timing only) and times, on the SAME
batch tensor, interleaved, one classifier forward versus one competency scoring (classifier + autoencoder).
Target: throughput ratio scoring/classifier >= 0.5.

    .venv/bin/python benchmarks/competency_bench.py [--device cpu] [--n 20] [--batch 32] [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def generators_on_digits(n: int, threads: int) -> dict:
    import torch

    sys.path[:0] = [str(ROOT / "tests")]
    from fixtures_tiny.competency_world import build_world

    import lpips

    from nemo_desktop.core.analyses.competency import (CompetencyEstimatorFit, CounterfactualConfig, EstimatorConfig,
                                                       LpipsDistance)
    from nemo_desktop.core.analyses.competency.causes import find_low_competency
    from nemo_desktop.core.analyses.competency.generators import generate
    from nemo_desktop.core.base.job_context import null_context

    torch.set_num_threads(threads)
    world = build_world()
    fit = CompetencyEstimatorFit(world.classifier, EstimatorConfig(image_size=16, channels=(16, 32), latent_dim=32,
                                                                   epochs=20, batch_size=64,
                                                                   calibration_fraction=0.25),
                                 work_dir=tempfile.mkdtemp())
    t = time.perf_counter()
    fitted = fit(world.fit_images, world.fit_labels)
    fit_s = time.perf_counter() - t
    est = fit.estimator

    def rho(ims):
        return [s.competency for s in est.score(ims)]

    low = [im for im, r in zip(world.nines, rho(world.nines)) if r < 0.9][: n // 2]
    low += [m for _, _, m in find_low_competency(world.test_images[:80], "noise", rho)][: n - len(low)]
    x = est.unit(low)
    # Random AlexNet trunk: the real trunk's cost is the same; its values only matter for the metric.
    dist = LpipsDistance(lpips.LPIPS(net="alex", pretrained=True, pnet_rand=True, verbose=False))
    cfg = CounterfactualConfig()
    rows = {}
    for m in ("igd", "fgd", "reco", "lgd", "lnn"):
        t = time.perf_counter()
        g = generate(m, est, x, cfg, null_context(), image_distance=dist)
        s = (time.perf_counter() - t) / len(x)
        with torch.no_grad():
            after = est.competency(g.images)["competency"]
        rows[m] = {"seconds_per_image": round(s, 4), "success_rate": round(float((after >= 0.9).float().mean()), 3)}
    return {"n_images": len(x), "fit_seconds": round(fit_s, 2), "calibration_z": fitted.calibration["z"],
            "calibration_at_bound": fitted.calibration["at_bound"], "generators": rows}


def scoring_throughput(arch: str, device: str, batch: int, repeats: int) -> dict:
    import torch

    sys.path[:0] = [str(ROOT / "tests")]
    from fixtures_tiny.classifiers import build_tiny_timm

    from nemo_desktop.core.analyses.competency import EstimatorConfig, FittedEstimator
    from nemo_desktop.core.analyses.competency.autoencoder import ConvAutoencoder
    from nemo_desktop.core.analyses.competency.parce import Calibration, ClassStatistics
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

    folder = build_tiny_timm(Path(tempfile.mkdtemp()) / "m", arch=arch, num_classes=10, input_size=224)
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{folder}"), LoadOptions(device=device))
    cfg = EstimatorConfig()
    ae = ConvAutoencoder.from_architecture(cfg.architecture())
    stats = ClassStatistics(tuple([0.01] * 10), tuple([0.005] * 10), tuple([10] * 10), tuple([False] * 10), 0.01, 0.005)
    est = FittedEstimator(clf, ae, stats, Calibration(1.0, 0.9, 0.9, False), mean_shift=2.0, input_size=(224, 224),
                          bank_latents=torch.zeros(1, cfg.latent_dim), bank_competency=torch.ones(1), manifest={})
    x = torch.rand(batch, 3, 224, 224, device=device)

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def clf_pass():
        with torch.no_grad():
            clf.logits_from_unit(x)

    def score_pass():
        with torch.no_grad():
            est.competency(x)

    for f in (clf_pass, score_pass):
        f()
    times = {"classifier": [], "competency": []}
    for _ in range(repeats):
        for name, f in (("classifier", clf_pass), ("competency", score_pass)):
            sync()
            t = time.perf_counter()
            f()
            sync()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"arch": arch, "device": device, "batch": batch, "repeats": repeats,
            "classifier_images_per_s": round(batch / med["classifier"], 1),
            "competency_images_per_s": round(batch / med["competency"], 1),
            "throughput_ratio": round(med["classifier"] / med["competency"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-generators", action="store_true")
    a = ap.parse_args()
    out = {}
    if not a.skip_generators:
        out["digits_world"] = generators_on_digits(a.n, a.threads)
    out["scoring"] = scoring_throughput(a.arch, a.device, a.batch, a.repeats)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
