"""Why is the classifier not competent on this image? (kind "sample", analysis "competency-cf")

    pipe = CompetencyCounterfactual(estimator, mllm, CounterfactualConfig(), lpips=lpips_or_None, store=store)
    result = pipe(image_or_path, ctx)        # -> CompetencyCounterfactualResult

Scores the image (competency, confidence, P(ID), loss z-score), runs each configured generator (stage names
"IGD", "FGD", "LGD" report per iteration; cancel within one step), measures each counterfactual (competency
after, success, LPIPS, feature and latent cosine, seconds), and asks the MLLM for the cause with the original
alone (B.4) and with each of `explain_methods`' counterfactuals (B.5). The MLLM sees the classifier's input view of
the image (`est.unit`: the classifier's resize/crop, the pixels competency was computed on), so the original and
the counterfactual, which lives at that view, show the same thing side by side; an uncropped original beside a
centre-cropped counterfactual stretched back would show two different framings. Artifacts: "input", "reconstruction",
"cf_<method>" and "diff_<method>" (|original - counterfactual|, mean over channels, x255). The result is
stored under a key of the estimator's weights, the classifier, the image content, the configuration, the
MLLM and prompt versions and LPIPS availability; a re-run of a complete result is answered from the store.
"""
from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Any

import numpy as np
import torch
from PIL import Image

from .... import __version__
from ...base.errors import JobCancelled
from ...base.job_context import JobContext, null_context
from ...methods.intervention import error_text, load_input, model_manifest, model_part
from .config import CounterfactualConfig, config_dict
from .estimator import FittedEstimator
from .explain import Explainer, dataset_description, prompt_versions
from .generators import GeneratorUnavailable, generate, pixel_distance
from .lpips_distance import LpipsDistance, MetricUnavailable, load_lpips, trunk_path
from .metrics import feature_similarity, latent_similarity
from .results import (COUNTERFACTUAL_ANALYSIS, COUNTERFACTUAL_VERSION, CompetencyCounterfactualResult,
                      CounterfactualOutput)

VERSION = COUNTERFACTUAL_VERSION


def to_pil(x: torch.Tensor) -> Image.Image:
    """(3, H, W) in [0, 1] -> RGB image (values outside [0, 1] are clipped for display)."""
    a = x.detach().float().clamp(0, 1).permute(1, 2, 0).cpu().numpy()
    return Image.fromarray(np.rint(a * 255).astype(np.uint8), "RGB")


def diff_map(x: torch.Tensor, y: torch.Tensor) -> Image.Image:
    d = (x.detach().float() - y.detach().float()).abs().mean(dim=0).clamp(0, 1).cpu().numpy()
    return Image.fromarray(np.rint(d * 255).astype(np.uint8), "L")


class CompetencyCounterfactual:
    def __init__(self, estimator: FittedEstimator, mllm: Any = None, config: CounterfactualConfig | None = None, *,
                 lpips: LpipsDistance | None = None, store: Any = None) -> None:
        self.estimator, self.mllm = estimator, mllm
        self.config = config or CounterfactualConfig()
        self.store = store
        self._lpips = lpips  # loaded on first use when not injected (AlexNet is large)
        self._lpips_error: str | None = None
        self.last_artifacts: dict[str, Image.Image] = {}

    @property
    def lpips_name(self) -> str | None:
        """The LPIPS used (part of the result key), or None when its weights are missing."""
        if self._lpips is not None:
            return self._lpips.name
        return "lpips-alex" if trunk_path("alex").is_file() else None

    def _get_lpips(self) -> LpipsDistance | None:
        if self._lpips is None and self._lpips_error is None:
            try:
                self._lpips = load_lpips("alex", min_side=self.config.lpips_size)
            except MetricUnavailable as exc:
                self._lpips_error = exc.user_text()
        return self._lpips

    def _image_distance(self):
        if self.config.igd_distance != "lpips":
            return pixel_distance(self.config.igd_distance)
        if self._get_lpips() is None:
            raise MetricUnavailable(self._lpips_error or "LPIPS is unavailable.")
        return self._lpips

    def key(self, image_sha: str) -> str:
        from ...store import result_key

        est = self.estimator
        explains = self.config.explain and self.mllm is not None
        return result_key(COUNTERFACTUAL_ANALYSIS, version=VERSION, image=image_sha,
                          estimator=est.manifest.get("weights_sha256"), classifier=model_part(est.classifier.info),
                          config=config_dict(self.config), lpips=self.lpips_name,
                          mllm=model_part(self.mllm.info) if explains else None,
                          prompts=prompt_versions() if explains else None)

    def __call__(self, image: str | os.PathLike | Image.Image, ctx: JobContext | None = None) -> CompetencyCounterfactualResult:
        ctx = ctx or null_context()
        cfg, est = self.config, self.estimator
        img, path, file_sha = load_input(image)
        from ...store import content_hash

        image_sha = content_hash(img)
        key = self.key(image_sha)
        if self.store is not None and (done := self.store.get(key)) is not None \
                and done.payload.get("manifest", {}).get("complete"):
            ctx.progress("Loaded from the results store", 1, 1)
            result = CompetencyCounterfactualResult.from_dict(done.payload)
            result.result_key = key
            return result

        ctx.check_cancelled()
        x = est.unit([img])
        original = est.scores_from_tensor(x)[0]
        with torch.no_grad():
            recon = est.reconstruct(x)[0]
        artifacts: dict[str, Image.Image] = {"input": img, "reconstruction": to_pil(recon)}
        result = CompetencyCounterfactualResult(image_sha256=image_sha, original=original,
                                                image_path=str(path) if path else None,
                                                evidence={"reconstruction": "reconstruction"})
        if original.competency >= cfg.threshold:
            result.notes.append(f"The classifier is already competent on this image (competency "
                                f"{original.competency:.3f} >= {cfg.threshold}); every generator returns it as is.")
        complete = True
        cf_images: dict[str, Image.Image] = {}
        for method in cfg.methods:
            out, images, retry = self._one(method, x, original.competency, ctx)
            complete &= not retry
            result.counterfactuals.append(out)
            if images is not None:
                cf_images[method] = images[0]
                artifacts[out.artifact], artifacts[out.diff_artifact] = images
        complete &= self._explain(to_pil(x[0]), result, cf_images, ctx)  # the classifier's view (docstring)
        result.timings = {o.method: o.seconds for o in result.counterfactuals if o.seconds is not None}
        result.manifest = self._manifest(file_sha, complete)
        self.last_artifacts = artifacts
        if self.store is not None:
            result.result_key = key
            self.store.put(key, COUNTERFACTUAL_ANALYSIS, result.to_dict(), artifacts)
        return result

    def _one(self, method: str, x: torch.Tensor, before: float, ctx: JobContext):
        cfg, est = self.config, self.estimator
        out = CounterfactualOutput(method=method, competency_before=before)
        try:
            distance = self._image_distance() if method == "igd" else None
            t0 = time.perf_counter()
            g = generate(method, est, x, cfg, ctx.sub(method.upper()), image_distance=distance)
            out.seconds = time.perf_counter() - t0
        except JobCancelled:
            raise
        except (MetricUnavailable, GeneratorUnavailable) as exc:  # deterministic: the key changes with its cause
            out.error = exc.user_text()
            return out, None, False
        except Exception as exc:  # noqa: BLE001 - one generator's failure is reported on its output, retried
            out.error = error_text(exc)
            return out, None, True
        cf = g.images
        score = est.scores_from_tensor(cf)[0]
        out.score_after, out.competency_after = score, score.competency
        out.success = bool(score.competency > cfg.threshold if cfg.compatibility else score.competency >= cfg.threshold)
        out.iterations = g.iterations[0]
        out.feature_similarity = float(feature_similarity(est, x, cf)[0])
        out.latent_similarity = float(latent_similarity(est, x, cf)[0])
        if self._get_lpips() is not None:
            with torch.no_grad():
                out.lpips = float(self._lpips(x, cf.clamp(0, 1))[0])
        out.artifact, out.diff_artifact = f"cf_{method}", f"diff_{method}"
        return out, (to_pil(cf[0]), diff_map(x[0], cf[0])), False

    def _explain(self, img: Image.Image, result: CompetencyCounterfactualResult, cf_images: dict[str, Image.Image],
                 ctx: JobContext) -> bool:
        cfg = self.config
        if not cfg.explain:
            return True
        if self.mllm is None:
            result.notes.append("No multimodal LLM was given, so there is no language explanation.")
            return True
        explainer = Explainer(self.mllm, dataset_description(self.estimator.class_names, cfg.dataset_subject,
                                                             cfg.dataset_description),
                              composite=cfg.composite, min_side=cfg.min_side, max_new_tokens=cfg.max_new_tokens)
        todo = [None] + [m for m in cfg.explain_methods if m in cf_images]
        ok = True
        for i, method in enumerate(todo):
            ctx.check_cancelled()
            ctx.progress("Explaining", i, len(todo))
            try:
                text = explainer(img, cf_images[method] if method else None)
            except JobCancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - an endpoint failure is reported, and retried on re-run
                ok = False
                text = None
                msg = f"The MLLM failed: {error_text(exc)}"
                if method is None:
                    result.notes.append(msg)
                else:
                    result.output(method).error = msg
            if method is None:
                result.explanation_without = text
            else:
                result.output(method).explanation = text
        ctx.progress("Explaining", len(todo), len(todo))
        return ok

    def _manifest(self, file_sha: str | None, complete: bool) -> dict[str, Any]:
        est = self.estimator
        explains = self.config.explain and self.mllm is not None
        return {"analysis": COUNTERFACTUAL_ANALYSIS, "version": VERSION, "app_version": __version__,
                "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "complete": complete,
                "estimator": {"weights_sha256": est.manifest.get("weights_sha256"),
                              "dataset": est.manifest.get("dataset"), "calibration_z": est.calibration.z,
                              "mean_shift": est.mean_shift},
                "models": {"classifier": model_manifest(est.classifier.info),
                           "mllm": model_manifest(self.mllm.info) if explains else None},
                "lpips": self.lpips_name, "lpips_unavailable": self._lpips_error,
                "prompts": prompt_versions() if explains else None, "config": config_dict(self.config),
                "mllm_view": "classifier input" if explains else None,
                "input_file_sha256": file_sha}

