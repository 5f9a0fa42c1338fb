"""CamMLLM (NEMO paper §4.1.3, appendix A.2): Grad-CAM of the predicted class, shown to an MLLM with the
A.2 prompt, which names the cause of the error (JSON `cause_of_error`).

    pipe = CamMLLMPipeline(classifier, mllm, editor=None, store=store, config=CamMLLMConfig())
    result = pipe(image, true_label, ctx)   # ExplanationResult; evidence["Grad-CAM overlay"] = "gradcam_overlay"

The MLLM sees ONE image, the overlay (the heatmap blended over the image as the classifier sees it, i.e.
resized/cropped by its own preprocessing, enlarged to `overlay_min_side`), as the prompt speaks of "the
Grad-CAM visualization"; `show_original=True` sends the plain image first as well (an option, not the
paper's setting). The Grad-CAM target is the predicted class (for zero-shot classifiers, its text
embedding); see gradcam.py. The heatmap (npy) and the overlay (PNG) are stored with the result.
`cam-mllm-validated` draws M replies and keeps the one with the largest CEI (validation.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PIL import Image

from ..base.job_context import JobContext
from ..models.protocols import ChatMessage
from .gradcam import gradcam, model_view, render_overlay
from .intervention import UnitCache, image_hash, sha_text, unit_key
from ..registry import Inputs
from ..registry.methods import method_entry
from .validation import VALIDATED_SUFFIX, BaselineConfig, BaselinePipeline, Proposal, draw_hypotheses

VERSION = "1"  # bump when this method's results change for the same inputs (part of every key)
METHOD = "cam-mllm"
OVERLAY, HEATMAP = "gradcam_overlay", "gradcam_heatmap"


@dataclass
class CamMLLMConfig(BaselineConfig):
    hypothesis_max_new_tokens: int = 512
    gradcam_layer: str | None = None  # dotted module name; None = chosen per architecture (gradcam.py)
    overlay_alpha: float = 0.5
    overlay_min_side: int = 336  # enlarge small model inputs so the MLLM can read the overlay
    show_original: bool = False


@method_entry(METHOD, config=CamMLLMConfig, version=VERSION,
                 inputs=Inputs(mllm="required", editor="optional"),
                 description="CamMLLM: an MLLM reads the Grad-CAM of the prediction (paper baseline, A.2).")
class CamMLLMPipeline(BaselinePipeline):
    """CamMLLM with its components injected; one `__call__` explains one image."""

    METHOD = METHOD
    CONFIG = CamMLLMConfig
    PROMPT = "cam_mllm"

    def _propose(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, file_sha: str | None,
                 clf: dict, sample: Any, n: int) -> Proposal:
        cfg: CamMLLMConfig = self.config  # type: ignore[assignment]
        overlay, heat, meta = self._gradcam(ctx, units, img, image_sha, clf, sample.pred_index)
        prompt = self.prompt.render(prediction_cls_name=sample.pred_name, true_cls_name=sample.true_name)
        parts = ([img] if cfg.show_original else []) + [overlay, prompt]
        candidates, _, transient = draw_hypotheses(
            ctx, units, self.mllm, [ChatMessage.user(*parts)], m=n,
            key_parts={"image_sha256": image_sha, "overlay_sha256": image_hash(overlay),
                       "show_original": cfg.show_original, "prompt_sha256": sha_text(prompt)},
            prompt=self.prompt, repair=self.repair, seed=cfg.seed, sampling=cfg.sampling,
            max_extra_draws=cfg.max_extra_draws, max_new_tokens=cfg.hypothesis_max_new_tokens)
        return Proposal(candidates=candidates, transient=transient,
                        evidence={"Grad-CAM overlay": OVERLAY, "Grad-CAM heatmap": HEATMAP},
                        artifacts={OVERLAY: overlay, HEATMAP: heat}, details={"gradcam": meta})

    def _gradcam(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, clf: dict,
                 target: int) -> tuple[Image.Image, Any, dict]:
        """Heatmap + overlay of `target`, cached per image, classifier, layer and overlay settings."""
        cfg: CamMLLMConfig = self.config  # type: ignore[assignment]
        key = unit_key("gradcam", image_sha256=image_sha, classifier=clf, target_index=target,
                       layer=cfg.gradcam_layer, alpha=cfg.overlay_alpha, min_side=cfg.overlay_min_side)
        hit = units.get(key)
        if hit is not None:
            return hit.load_image(OVERLAY).convert("RGB"), hit.load_array(HEATMAP), hit.payload["meta"]
        ctx.check_cancelled()
        ctx.progress("Grad-CAM", 0, 1)
        cam = gradcam(self.classifier, img, target_index=target, layer=cfg.gradcam_layer)
        overlay = render_overlay(model_view(self.classifier, img), cam.heatmap, alpha=cfg.overlay_alpha,
                                 min_side=cfg.overlay_min_side)
        meta = cam.to_meta()
        units.put(key, "gradcam", {"image_sha256": image_sha, "classifier": clf, "meta": meta},
                  {OVERLAY: overlay, HEATMAP: cam.heatmap})
        ctx.progress("Grad-CAM", 1, 1)
        return overlay, cam.heatmap, meta


@method_entry(METHOD + VALIDATED_SUFFIX, config=CamMLLMConfig, version=VERSION,
                 inputs=Inputs(mllm="required", editor="interventions"),
                 description="CamMLLM with validation: M replies, the one with the largest CEI (Table 2).")
class CamMLLMValidatedPipeline(CamMLLMPipeline):
    VALIDATED = True


# The module's registry entries, named by its entry point (pyproject.toml, nemo_desktop.analyses).
ANALYSES = (CamMLLMPipeline.ENTRY, CamMLLMValidatedPipeline.ENTRY)
