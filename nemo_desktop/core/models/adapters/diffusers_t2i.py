"""Text-to-image generators from diffusers pipelines (kind "generator", family "diffusers-t2i"): the condition
source of model differences for open conditions (seed 002 §5.3 generates its images with Stable Diffusion 3.5).

    gen = load_model("flux-schnell")                         # or ModelSpec("generator", "diffusers-t2i", folder)
    images = gen.generate("a photo of a woman with blond hair", n=8, seed=0, on_step=ctx.step_callback(...))

Weights are found, loaded (safetensors only, no remote code) and placed (dtype, device, CPU offload) by the loader
the editors use (diffusers_loading.py). The sampling settings a
checkpoint's card recommends ride in its catalog entry's options (`steps`, `guidance`, `max_sequence_length`,
`width`, `height`, `negative_prompt`); an unset one is the pipeline's own default. They are part of
`info.extra`, so every cached difference is keyed by the settings that made its images. Cancel: the step
callback raises JobCancelled inside diffusers' loop, as for the editors; CUDA out-of-memory becomes a clear
error.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from PIL import Image

from ...base.errors import ConfigError, JobCancelled, ModelError
from ...base.device import translate_oom
from ..protocols import ModelInfo
from ..families import LoadOptions, ModelSpec, register_family
from .diffusers_loading import PipelineHolder, load_pipeline, step_callback
from .spec_checks import check_options

log = logging.getLogger(__name__)

FAMILY = "diffusers-t2i"
PIPELINES = ("StableDiffusion3Pipeline", "FluxPipeline", "StableDiffusionPipeline", "StableDiffusionXLPipeline",
             "PixArtSigmaPipeline", "SanaPipeline")
OPTIONS = ("steps", "guidance", "max_sequence_length", "width", "height", "negative_prompt", "offload",
           "images_per_call")
DEFAULTS_VERSION = 1


class DiffusersTextToImage(PipelineHolder):
    """A loaded diffusers text-to-image pipeline with its checkpoint's sampling settings."""

    def __init__(self, pipe: Any, info: ModelInfo, options: dict | None = None) -> None:
        self.pipe, self.info = pipe, info
        self.options = dict(options or {})
        self._lock = threading.Lock()
        pipe.set_progress_bar_config(disable=True)

    def call_kwargs(self, prompt: str, n: int) -> dict[str, Any]:
        o = self.options
        kwargs: dict[str, Any] = {"prompt": prompt, "num_images_per_prompt": int(n)}
        for name, arg in (("steps", "num_inference_steps"), ("guidance", "guidance_scale"),
                          ("max_sequence_length", "max_sequence_length"), ("width", "width"), ("height", "height"),
                          ("negative_prompt", "negative_prompt")):
            if o.get(name) is not None:
                kwargs[arg] = o[name]
        return kwargs

    def generate(self, prompt: str, *, n: int = 1, seed: int = 0,
                 on_step: Callable[[int, int], bool] | None = None) -> list[Image.Image]:
        """n images for the prompt, deterministic for the seed (a CPU generator: same noise on every device)."""
        import torch

        if self.pipe is None:
            raise ModelError(f"{self.info.model_id} was unloaded.", hint="Load the generator again.")
        if n < 1:
            raise ConfigError(f"Ask for at least one image (got {n}).")
        per_call = max(1, int(self.options.get("images_per_call") or n))
        images: list[Image.Image] = []
        for start in range(0, n, per_call):
            kwargs = self.call_kwargs(prompt, min(per_call, n - start))
            generator = torch.Generator(device="cpu").manual_seed(int(seed) + start)
            steps = int(kwargs.get("num_inference_steps") or 0)
            with self._lock:
                try:
                    with torch.inference_mode():
                        out = self.pipe(**kwargs, generator=generator, output_type="pil",
                                        callback_on_step_end=step_callback(steps, on_step, "Image generation"))
                except JobCancelled:
                    self._release_offloaded()
                    raise
                except Exception as exc:
                    oom = translate_oom(exc, what=f"Image generation with {self.info.model_id}")
                    if oom is not None:
                        self._release_offloaded()
                        raise oom from exc
                    raise
            flags = getattr(out, "nsfw_content_detected", None)
            if flags and any(flags):
                raise ModelError(f"The safety checker of {self.info.model_id} blanked a generated image.",
                                 hint="Rephrase the condition or use another generator; a black image would "
                                      "corrupt the measured differences.")
            images += [im.convert("RGB") for im in out.images]
        return images

    def __repr__(self) -> str:
        return f"DiffusersTextToImage({self.info.model_id!r})"


@register_family("generator", FAMILY)
def load_diffusers_t2i(spec: ModelSpec, options: LoadOptions) -> DiffusersTextToImage:
    check_options(spec.options, OPTIONS, "a text-to-image generator")
    loaded = load_pipeline(spec, options, role="generator", accepted=PIPELINES,
                           expected="a text-to-image pipeline this app supports")
    settings = {k: spec.options[k] for k in OPTIONS if k not in ("offload",) and spec.options.get(k) is not None}
    info = ModelInfo(model_id=spec.model_id, family=FAMILY, revision=loaded.revision or spec.revision,
                     extra={**loaded.extra(), "defaults_version": DEFAULTS_VERSION, "settings": settings})
    return DiffusersTextToImage(loaded.pipe, info, spec.options)
