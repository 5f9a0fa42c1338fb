"""The seed's Tables 1/2 on the user's data: every generator over a set of low-competency images.

    bench = CompetencyBench(estimator, CounterfactualConfig(), lpips=lpips_or_None)
    result = bench(images, reference_images, ctx)      # -> CompetencyBenchResult (one row per generator + "orig")

Only images below the threshold are used (the others are counted in the manifest). Success, LPIPS, feature
and latent cosine follow the reference (similarities are means over successful pairs); FD/KD compare all
counterfactuals of a generator with `reference_images` (the calibration images in the seed) in the
classifier's feature space by default; time is seconds per low-competency image.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Sequence

import numpy as np
import torch

from .... import __version__
from ...errors import ConfigError
from ...jobs import JobContext, null_context
from .config import CounterfactualConfig, config_dict
from .estimator import FittedEstimator
from .generators import generate, pixel_distance
from .lpips_distance import LpipsDistance, MetricUnavailable, load_lpips
from .metrics import feature_similarity, feature_space, frechet_and_kernel_distance, latent_similarity, success
from .results import BENCH_ANALYSIS, CompetencyBenchResult, GeneratorMetrics


class CompetencyBench:
    def __init__(self, estimator: FittedEstimator, config: CounterfactualConfig | None = None, *,
                 lpips: LpipsDistance | None = None, feature: str = "classifier") -> None:
        self.estimator, self.config, self.feature = estimator, config or CounterfactualConfig(), feature
        self._lpips, self._lpips_error = lpips, None
        if lpips is None:
            try:
                self._lpips = load_lpips("alex", min_side=self.config.lpips_size)
            except MetricUnavailable as exc:
                self._lpips_error = exc.user_text()

    def __call__(self, images: Sequence[Any], reference_images: Sequence[Any], ctx: JobContext | None = None
                 ) -> CompetencyBenchResult:
        ctx = ctx or null_context()
        est, cfg = self.estimator, self.config
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
        ref = torch.cat([est.unit(reference_images[s:s + 64]) for s in range(0, len(reference_images), 64)])
        feats = feature_space(est, self.feature)
        rows = [self._row("orig", x, x, score_seconds / len(images), feats, ref, ctx)]
        for method in cfg.methods:
            ctx.check_cancelled()
            if method == "igd" and cfg.igd_distance == "lpips" and self._lpips is None:
                rows.append(GeneratorMetrics(method, len(x), 0, 0.0, None, None, None, None, None, 0.0,
                                             notes=[self._lpips_error or "LPIPS is unavailable"]))
                continue
            distance = (self._lpips if cfg.igd_distance == "lpips" else pixel_distance(cfg.igd_distance)) \
                if method == "igd" else None
            outs, t1 = [], time.perf_counter()
            sub = ctx.sub(method.upper())
            for s in range(0, len(x), cfg.batch_size):
                outs.append(generate(method, est, x[s:s + cfg.batch_size], cfg, sub, image_distance=distance).images)
            seconds = (time.perf_counter() - t1) / len(x)
            rows.append(self._row(method, x, torch.cat(outs), seconds, feats, ref, ctx))
        manifest = {"analysis": BENCH_ANALYSIS, "app_version": __version__,
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "estimator": est.manifest.get("weights_sha256"), "config": config_dict(cfg),
                    "n_images": len(images), "n_low_competency": int(low.sum()),
                    "lpips": self._lpips.name if self._lpips is not None else None,
                    "lpips_unavailable": self._lpips_error}
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
        fd, kd = frechet_and_kernel_distance(feats, ref, cf.clamp(0, 1), seed=cfg.seed)
        notes = [] if self._lpips is not None else [self._lpips_error or "LPIPS is unavailable"]
        return GeneratorMetrics(method, len(x), int(ok.sum()), float(ok.mean()), lp,
                                mean_over_valid(feature_similarity(est, x, cf)),
                                mean_over_valid(latent_similarity(est, x, cf)), fd, kd, float(seconds), notes)
