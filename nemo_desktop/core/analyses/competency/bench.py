"""The seed's Tables 1/2 on the user's data: every generator over a set of low-competency images.

    bench = CompetencyBench(estimator, CounterfactualConfig(), lpips=lpips_or_None)
    result = bench(images, reference_images, ctx)      # -> CompetencyBenchResult (one row per generator + "orig")

Only images below the threshold are used (the others are counted in the manifest). Success, LPIPS, feature
and latent cosine follow the reference (similarities are means over successful pairs); FD/KD compare all
counterfactuals of a generator with `reference_images` (the calibration images in the seed) in the
classifier's feature space by default; time is seconds per low-competency image.
"""
from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Any, Sequence

import numpy as np
import torch

from .... import __version__
from ...base.errors import ConfigError
from ...base.job_context import JobContext, null_context
from .config import CompetencyBenchConfig, CounterfactualConfig, config_dict
from .estimator import FittedEstimator
from .generators import GeneratorUnavailable, generate, pixel_distance
from .lpips_distance import LpipsDistance, MetricUnavailable, load_lpips, trunk_path
from .metrics import (feature_similarity, feature_space, frechet_and_kernel_distance, inception_path,
                      latent_similarity, success)
from .results import BENCH_ANALYSIS, BENCH_VERSION, CompetencyBenchResult, GeneratorMetrics

VERSION = BENCH_VERSION
SCORING_SHARE = 0.08  # of the bar: scoring the set (the demo's 360 digits: 4.7 s of 80.6 s, progress_truth.py)


# Relative cost of each generator over the same images, for one progress bar across them (each one filling its own
# share, so the bar neither says 100 % after the first nor sits there through LGD). Measured by
# benchmarks/progress_truth.py on the demo's digits (100 iterations, 2 CPU cores): FGD 21.8 s, LGD 54.0 s. Reco and
# LNN run no iterations (a reconstruction, a nearest neighbour); IGD's per-iteration work is FGD's plus the image
# distance, taken as FGD's (not measured: LPIPS needs weights that are not installed there).
GENERATOR_COST = {"igd": 1.0, "fgd": 1.0, "reco": 0.05, "lgd": 2.5, "lnn": 0.1}


def generator_spans(methods: Sequence[str], end: float = 0.98) -> dict[str, tuple[float, float]]:
    """method -> the (start, end) share of the generating stage it fills, in proportion to GENERATOR_COST; what is
    left after `end` is the last generator's measures (FD, KD), which report no steps of their own."""
    costs = [GENERATOR_COST.get(m, 1.0) for m in methods]
    total, start, out = sum(costs) or 1.0, 0.0, {}
    for method, cost in zip(methods, costs):
        out[method] = (end * start / total, end * min(1.0, (start + cost) / total))
        start += cost
    return out


class CompetencyBench:
    def __init__(self, estimator: FittedEstimator, config: CounterfactualConfig | None = None, *,
                 lpips: LpipsDistance | None = None, feature: str = "classifier") -> None:
        self.estimator, self.config, self.feature = estimator, config or CounterfactualConfig(), feature
        self._lpips, self._lpips_error = lpips, None
        self._fd_error: str | None = None
        if lpips is None:
            try:
                self._lpips = load_lpips("alex", min_side=self.config.lpips_size)
            except MetricUnavailable as exc:
                self._lpips_error = exc.user_text()

    def __call__(self, images: Sequence[Any], reference_images: Sequence[Any], ctx: JobContext | None = None
                 ) -> CompetencyBenchResult:
        ctx = ctx or null_context()
        est, cfg = self.estimator, self.config
        ctx.check_cancelled()
        t0 = time.perf_counter()
        x_all = torch.cat([est.unit(images[s:s + cfg.batch_size]) for s in range(0, len(images), cfg.batch_size)])
        with torch.no_grad():
            before = est.competency(x_all)["competency"].numpy()
        score_seconds = time.perf_counter() - t0
        low = before < cfg.threshold
        if not low.any():
            raise ConfigError(f"None of the {len(images)} images has competency below {cfg.threshold}.",
                              hint="The bench compares counterfactuals of low-competency images; give some.")
        x = x_all[torch.from_numpy(low)]
        ref = torch.cat([est.unit(reference_images[s:s + 64]) for s in range(0, len(reference_images), 64)]) \
            if len(reference_images) else torch.zeros((0, *x.shape[1:]))
        try:
            feats = feature_space(est, self.feature)
        except MetricUnavailable as exc:  # FD/KD are reported as unavailable, the other metrics still run
            feats, self._fd_error = None, exc.user_text()
        rows = [self._row("orig", x, x, score_seconds / len(images), feats, ref, ctx)]
        lpips_missing = cfg.igd_distance == "lpips" and self._lpips is None
        # Shares of the bar for the generators that will run (IGD without LPIPS is a row that says so, at once).
        spans = generator_spans([m for m in cfg.methods if not (m == "igd" and lpips_missing)])
        batches = max(1, -(-len(x) // cfg.batch_size))
        for method in cfg.methods:
            ctx.check_cancelled()
            if method == "igd" and lpips_missing:
                rows.append(GeneratorMetrics(method, len(x), 0, 0.0, None, None, None, None, None, 0.0,
                                             notes=[self._lpips_error or "LPIPS is unavailable"], available=False))
                continue
            distance = (self._lpips if cfg.igd_distance == "lpips" else pixel_distance(cfg.igd_distance)) \
                if method == "igd" else None
            outs, t1 = [], time.perf_counter()
            lo, hi = spans[method]
            try:
                for b, s in enumerate(range(0, len(x), cfg.batch_size)):  # each batch its own share of the bar
                    sub = ctx.sub(method.upper(), lo + (hi - lo) * b / batches, lo + (hi - lo) * (b + 1) / batches)
                    outs.append(generate(method, est, x[s:s + cfg.batch_size], cfg, sub,
                                         image_distance=distance).images)
            except GeneratorUnavailable as exc:  # e.g. LNN without a high-competency bank: a row that says so
                rows.append(GeneratorMetrics(method, len(x), 0, 0.0, None, None, None, None, None, 0.0,
                                             notes=[exc.user_text()], available=False))
                continue
            seconds = (time.perf_counter() - t1) / len(x)
            rows.append(self._row(method, x, torch.cat(outs), seconds, feats, ref, ctx))
        manifest = {"analysis": BENCH_ANALYSIS, "app_version": __version__,
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "estimator": est.manifest.get("weights_sha256"), "config": config_dict(cfg),
                    "n_images": len(images), "n_low_competency": int(low.sum()),
                    "lpips": self._lpips.name if self._lpips is not None else None,
                    "lpips_unavailable": self._lpips_error, "fd_unavailable": self._fd_error}
        return CompetencyBenchResult(rows, f"FD_{'clf' if self.feature == 'classifier' else self.feature}",
                                     len(ref), manifest)

    def _row(self, method: str, x: torch.Tensor, cf: torch.Tensor, seconds: float, feats, ref: torch.Tensor,
             ctx: JobContext) -> GeneratorMetrics:
        est, cfg = self.estimator, self.config
        ctx.check_cancelled()
        with torch.no_grad():
            after = est.competency(cf)["competency"].numpy()
        ok = success(after, cfg.threshold, strict=cfg.compatibility)
        if method == "orig":
            ok = np.zeros(len(x), bool)  # by construction none of the originals passes
        valid = torch.from_numpy(ok) if method != "orig" else torch.ones(len(x), dtype=torch.bool)

        def mean_over_valid(values: np.ndarray) -> float | None:
            v = values[valid.numpy()]
            return float(v.mean()) if len(v) else None

        lp = None
        if self._lpips is not None:
            with torch.no_grad():
                lp = mean_over_valid(self._lpips(x, cf.clamp(0, 1)).numpy())
        fd, kd = frechet_and_kernel_distance(feats, ref, cf.clamp(0, 1), seed=cfg.seed) if feats is not None \
            else (None, None)
        notes = [] if self._lpips is not None else [self._lpips_error or "LPIPS is unavailable"]
        if feats is None:
            notes.append(self._fd_error)
        return GeneratorMetrics(method, len(x), int(ok.sum()), float(ok.mean()), lp,
                                mean_over_valid(feature_similarity(est, x, cf)),
                                mean_over_valid(latent_similarity(est, x, cf)), fd, kd, float(seconds), notes)


# -- the analysis (registry entry `competency-bench`) ----------------------------------------------------------
class CompetencyBenchAnalysis:
    """`competency-bench`: the seed's Tables 1/2 on a labelled or unlabelled image set: every generator over the
    set's low-competency images (success rate, LPIPS, feature and latent cosine, FD, KD, seconds per image).

    FD/KD compare the counterfactuals with `reference` images when given (the seed uses the calibration set),
    else with the set's own high-competency images. The result is stored under a key of the estimator, the
    classifier, both image sets' content, the configuration and LPIPS availability."""

    def __init__(self, classifier: Any, fitted: Any, store: Any = None,
                 config: CompetencyBenchConfig | None = None) -> None:
        from .analyses import resolve_estimator

        self.estimator = resolve_estimator(fitted, classifier, store)
        self.store = store
        self.config = config or CompetencyBenchConfig()

    def _image_paths(self, images: Any) -> list[Any]:
        if isinstance(images, (str, os.PathLike)):
            from .score_set import open_image_set

            images = open_image_set(images)
        if hasattr(images, "paths"):
            return list(images.paths)
        return list(images)

    def key(self, fingerprint: str, reference_fingerprint: str | None) -> str:
        from ...methods.intervention import model_part
        from ...store import result_key

        return result_key(BENCH_ANALYSIS, version=VERSION, estimator=self.estimator.manifest.get("weights_sha256"),
                          classifier=model_part(self.estimator.classifier.info), images=fingerprint,
                          reference=reference_fingerprint, config=config_dict(self.config),
                          lpips="lpips-alex" if trunk_path("alex").is_file() else None,
                          inception=inception_path().is_file() if self.config.feature_space == "inception" else None)

    def __call__(self, images: Any, ctx: JobContext | None = None, *, reference: Any = None) -> CompetencyBenchResult:
        """`images`: a dataset (folder of class folders or CSV), its path, or a list of images/paths."""
        from .fit import dataset_fingerprint

        ctx = ctx or null_context()
        cfg, est = self.config, self.estimator
        paths = self._image_paths(images)
        ref_paths = self._image_paths(reference) if reference is not None else None
        if len(paths) < 2:
            raise ConfigError(f"The competency bench needs a set of images (got {len(paths)}).")
        fingerprint = dataset_fingerprint(paths, [0] * len(paths))
        ref_fp = dataset_fingerprint(ref_paths, [0] * len(ref_paths)) if ref_paths is not None else None
        key = self.key(fingerprint, ref_fp)
        if self.store is not None and (done := self.store.get(key)) is not None:
            ctx.progress("Loaded from the results store", 1, 1)
            result = CompetencyBenchResult.from_dict(done.payload)
            result.result_key = key
            return result
        scores = est.score(paths, ctx.sub("Scoring", 0.0, SCORING_SHARE))
        rho = np.array([s.competency for s in scores])
        low = [p for p, r in zip(paths, rho) if r < cfg.threshold][:cfg.max_images]
        if ref_paths is None:
            ref_paths = [p for p, r in zip(paths, rho) if r >= cfg.threshold]
        bench = CompetencyBench(est, cfg.counterfactual_config(), feature=cfg.feature_space)
        result = bench(low, ref_paths, ctx.sub("Generating", SCORING_SHARE, 1.0)) if low else None
        if result is None:
            raise ConfigError(f"None of the {len(paths)} images has competency below {cfg.threshold}.",
                              hint="The bench compares counterfactuals of low-competency images; give some.")
        result.manifest.update({
            "version": VERSION, "n_images": len(paths), "n_low_competency": int((rho < cfg.threshold).sum()),
            "n_used": len(low), "bench_config": config_dict(cfg), "images_fingerprint": fingerprint,
            "reference": "given" if reference is not None else "the set's images at or above the threshold",
            "reference_fingerprint": ref_fp, "complete": True})
        if self.store is not None:
            result.result_key = key
            self.store.put(key, BENCH_ANALYSIS, result.to_dict())
        return result
