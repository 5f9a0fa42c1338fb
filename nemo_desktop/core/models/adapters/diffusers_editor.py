"""Instruction-based image editors from diffusers pipelines: FLUX.1 Kontext, Qwen-Image-Edit, InstructPix2Pix.

One base class does everything the three families share: load the pipeline (diffusers_loading.py, shared with
the text-to-image generators: weights folder, safetensors, dtype, device, CPU offload), honour the caller's
output size exactly, seed, report each denoising step, stop on cancel and turn CUDA out-of-memory into a clear
error. A family only says which pipeline classes it
accepts, its size multiple and default steps/guidance, and how its `__call__` spells them.

Size: `edit(size=...)` runs the pipeline at exactly that size, rounded to the pipeline's multiple (8 for
InstructPix2Pix, 16 for the flow-matching DiTs), and returns an image of that size. Which size to ask for is
the caller's choice; `preferred_size(width, height)` gives the editor's preferred working resolution for an
input of that shape (the aspect ratio kept, the area the family is trained at; see `preferred_working_size`),
and the counterfactual tester (methods/intervention.py) uses it by default and resizes the result back to
the input image's size. FluxKontextPipeline would otherwise rescale every request to about one megapixel
(`max_area=1024**2` and `_auto_resize`), so both are passed explicitly. Qwen-Image-Edit always encodes its
*conditioning* image at about one megapixel inside the pipeline (no argument turns that off); its output
size is still honoured.

Batches: `edit_batch` runs several instructions on one image and `edit_images` one instruction on several
images (the reference control's edits, methods/edit_control.py), each in one pipeline call, every batch
element with its own generator seeded like a single `edit`, so a batched result is the single edit's result
(up to batched float rounding); `edit_batch_capacity` says how many fit in free GPU memory.

Prompt embeddings (FLUX.1 Kontext): T5 and CLIP run once per instruction; the embeddings are kept and passed to
the pipeline, which uses them unchanged (identical images, tested), so repeated instructions skip both encoders.

Quantisation: the option `quantize` ("int8", "float8" on CUDA) is in diffusers_quantize.py.

Cancel: the step callback raises JobCancelled inside diffusers' loop (and sets `_interrupt` for the
pipelines that read it). Raising is the only stop that works for all three: the InstructPix2Pix loop never
reads `_interrupt`, and the others would still run the VAE decode of an unwanted image.
"""
from __future__ import annotations

import inspect
import logging
import math
import threading
from collections import OrderedDict
from typing import Any, ClassVar

from PIL import Image

from ...base.errors import ConfigError, JobCancelled, ModelError
from ..batching import batch_from_free_memory, cuda_free_bytes
from ...base.device import resolve_device, translate_oom
from ..protocols import ModelInfo, StepCallback
from ..families import LoadOptions, ModelSpec, register_family
from .diffusers_loading import PipelineHolder, load_pipeline, step_callback
from .diffusers_quantize import check_device, quantize_choice, quantize_pipeline, quantized_model_id

log = logging.getLogger(__name__)


def preferred_working_size(width: int, height: int, *, area: int, multiple: int,
                           rounding: str = "nearest") -> tuple[int, int]:
    """The working size of an editor trained at about `area` pixels for a `width` x `height` input: the
    input's aspect ratio, `area` pixels, each side a multiple of `multiple` (at least one multiple).

    rounding="floor" is FluxKontextPipeline's own rule for `max_area` (sides rounded to pixels, then floored
    to the multiple); "nearest" is Qwen-Image-Edit's `calculate_dimensions` (the exact side rounded to the
    nearest multiple). A pure function, so the default sizes are tested without building a pipeline."""
    if width < 1 or height < 1 or area < 1 or multiple < 1:
        raise ValueError(f"invalid size {width}x{height}, area {area} or multiple {multiple}")
    ratio = width / height
    if rounding == "floor":
        w = round(math.sqrt(area * ratio)) // multiple * multiple
        h = round(math.sqrt(area / ratio)) // multiple * multiple
    elif rounding == "nearest":
        exact_w = math.sqrt(area * ratio)
        w, h = round(exact_w / multiple) * multiple, round(exact_w / ratio / multiple) * multiple
    else:
        raise ValueError(f"unknown rounding {rounding!r}")
    return max(multiple, int(w)), max(multiple, int(h))


class DiffusersEditor(PipelineHolder):
    """ImageEditor over a loaded diffusers pipeline; subclasses describe one family."""

    family: ClassVar[str]
    pipeline_classes: ClassVar[tuple[str, ...]]
    default_steps: ClassVar[int]
    default_guidance: ClassVar[float]
    # The preferred working resolution (see `preferred_size`): pixels and how sides are rounded.
    preferred_area: ClassVar[int] = 1024 * 1024
    preferred_rounding: ClassVar[str] = "nearest"
    preferred_multiple: ClassVar[int | None] = None  # None = size_multiple
    # Kept in ModelInfo.extra so cache keys change when a family's defaults change.
    defaults_version: ClassVar[int] = 1

    def __init__(self, pipe: Any, info: ModelInfo, options: dict | None = None):
        self.pipe = pipe
        self.info = info
        self.options = dict(options or {})
        self._lock = threading.Lock()
        self._bytes_per_image: dict[tuple[int, int], int] = {}  # measured peak memory of one edit, per size
        self._prompt_cache: OrderedDict = OrderedDict()  # (instruction, length) -> embeddings; see encode_prompts
        pipe.set_progress_bar_config(disable=True)

    # -- per-family hooks -----------------------------------------------------------------------------------
    @property
    def size_multiple(self) -> int:
        """Pixels per latent patch: width and height must be multiples of this."""
        return int(self.pipe.vae_scale_factor) * 2

    def call_kwargs(self, image: Image.Image | list[Image.Image], instruction: str | list[str], width: int,
                    height: int, steps: int, guidance: float) -> dict:
        """The pipeline's keyword arguments: one image and one instruction (`edit`), one image and a list of
        instructions (`edit_batch`), or a list of images with as many instructions (`edit_images`)."""
        raise NotImplementedError

    def steps_for_pipeline(self) -> int:
        return self.default_steps

    def encode_prompts(self, kwargs: dict) -> dict:
        """Called under the lock and inference mode just before the pipeline call: a family may replace the
        prompt by precomputed embeddings here. Default: the pipeline encodes the prompt itself."""
        return kwargs

    # -- the ImageEditor protocol -----------------------------------------------------------------------------
    def edit(self, image: Image.Image, instruction: str, *, seed: int = 0, steps: int | None = None,
             guidance: float | None = None, size: tuple[int, int] | None = None,
             on_step: StepCallback | None = None) -> Image.Image:
        return self._run([image], [instruction], seed, steps, guidance, size, on_step)[0]

    def edit_batch(self, image: Image.Image, instructions: list[str], *, seed: int = 0, steps: int | None = None,
                   guidance: float | None = None, size: tuple[int, int] | None = None,
                   on_step: StepCallback | None = None) -> list[Image.Image]:
        """Several instructions on one image in one pipeline call (one batch through the denoiser). Every
        instruction gets its own generator seeded with `seed`, so it starts from the noise `edit` would use."""
        return self._run([image], list(instructions), seed, steps, guidance, size, on_step)

    def edit_images(self, images: list[Image.Image], instruction: str, *, seed: int = 0, steps: int | None = None,
                    guidance: float | None = None, size: tuple[int, int] | None = None,
                    on_step: StepCallback | None = None) -> list[Image.Image]:
        """One instruction on several images in one pipeline call (one batch through the denoiser). Each image is
        resized to the working size as `edit` resizes it and gets its own generator seeded with `seed`, so each
        result is what `edit(image, instruction, seed=seed)` gives for it; results in the order of `images`, at
        `size`. Images of different sizes need `size` (one batch runs at one size). A pipeline that reads a
        list of images as the conditions of ONE edit (QwenImageEditPlusPipeline) edits them one call each."""
        images = list(images)
        if len(images) > 1 and not self.batches_images:
            return [self._run([im], [instruction], seed, steps, guidance, size, on_step)[0] for im in images]
        return self._run(images, [instruction] * len(images), seed, steps, guidance, size, on_step)

    @property
    def batches_images(self) -> bool:
        """Whether one pipeline call can edit several images (a list of images is a batch, not one edit's
        several conditioning images)."""
        return True

    def edit_batch_capacity(self, size: tuple[int, int]) -> int:
        """How many edits at `size` (width, height) fit in one batch: chosen from the free memory of the
        editor's CUDA device and the peak memory a single edit at that size was measured to take (the first
        edit of a size runs alone to measure it). Off CUDA: 1 (host memory is not measured, and batching
        gains little there). The same number holds for `edit_batch` and `edit_images` (one batch element
        per edit either way)."""
        device = str(self.info.extra.get("device", "cpu"))
        width, height = self.working_size(int(size[0]), int(size[1]))
        return batch_from_free_memory(cuda_free_bytes(device), self._bytes_per_image.get((width, height)))

    def _run(self, images: list[Image.Image], instructions: list[str], seed, steps, guidance, size,
             on_step) -> list[Image.Image]:
        """The one body of `edit`, `edit_batch` and `edit_images`: one image with one or several instructions,
        or as many images as instructions (batch element i: images[i] with instructions[i])."""
        import torch

        if self.pipe is None:
            raise ModelError(f"{self.info.model_id} was unloaded.", hint="Load the editor again.")
        if not instructions:
            return []
        if len(images) not in (1, len(instructions)):
            raise ValueError(f"{len(images)} images for {len(instructions)} instructions")
        if size is None and len({im.size for im in images}) > 1:
            raise ConfigError(f"The {len(images)} images to edit have different sizes and no output size was given.",
                              hint="Pass size=(width, height): every image is edited at that size.")
        out_w, out_h = size or images[0].size
        if out_w < 1 or out_h < 1:
            raise ConfigError(f"Invalid output size {out_w}x{out_h}.", hint="Width and height must be positive.")
        width, height = self.working_size(out_w, out_h)
        steps = int(steps or self.steps_for_pipeline())
        guidance = float(self.default_guidance if guidance is None else guidance)
        sources = [self._working_image(im, width, height) for im in images]
        single = len(instructions) == 1
        kwargs = self.call_kwargs(sources[0] if len(sources) == 1 else sources,
                                  instructions[0] if single else instructions, width, height, steps, guidance)
        # A CPU generator gives the same noise for a seed on every device.
        generators = [torch.Generator(device="cpu").manual_seed(int(seed)) for _ in instructions]
        device = str(self.info.extra.get("device", "cpu"))
        measure = device.startswith("cuda") and single
        with self._lock:
            try:
                if measure:
                    torch.cuda.reset_peak_memory_stats(device)
                    before = torch.cuda.memory_allocated(device)
                with torch.inference_mode():
                    kwargs = self.encode_prompts(kwargs)
                    out = self.pipe(**kwargs, generator=generators[0] if single else generators, output_type="pil",
                                    callback_on_step_end=step_callback(steps, on_step, "Image editing"))
                if measure:
                    self._bytes_per_image[(width, height)] = torch.cuda.max_memory_allocated(device) - before
            except JobCancelled:
                self._release_offloaded()
                raise
            except Exception as exc:  # noqa: BLE001 - only OOM is translated; everything else propagates
                oom = translate_oom(exc, what=f"Image editing with {self.info.model_id}")
                if oom is not None:
                    self._release_offloaded()
                    raise oom from exc
                raise
        self._check_safety(out)
        results = list(out.images)
        if len(results) != len(instructions):
            raise ModelError(f"{self.info.model_id} returned {len(results)} images for {len(instructions)} "
                             "edits.")
        return [r if r.size == (out_w, out_h) else r.resize((out_w, out_h), Image.Resampling.LANCZOS)
                for r in results]

    @staticmethod
    def _working_image(image: Image.Image, width: int, height: int) -> Image.Image:
        source = image.convert("RGB")
        if source.size != (width, height):
            source = source.resize((width, height), Image.Resampling.LANCZOS)
        return source

    def unload(self) -> None:
        self._prompt_cache.clear()  # device tensors
        super().unload()

    def preferred_size(self, width: int, height: int) -> tuple[int, int]:
        """The editor's preferred working resolution for a `width` x `height` input (aspect ratio kept)."""
        return preferred_working_size(width, height, area=self.preferred_area,
                                      multiple=self.preferred_multiple or self.size_multiple,
                                      rounding=self.preferred_rounding)

    def working_size(self, width: int, height: int) -> tuple[int, int]:
        """The size the pipeline runs at: each side rounded to the nearest multiple (at least one)."""
        m = self.size_multiple
        return max(m, int(width / m + 0.5) * m), max(m, int(height / m + 0.5) * m)

    def _check_safety(self, out: Any) -> None:
        flags = getattr(out, "nsfw_content_detected", None)
        if flags and any(flags):
            raise ModelError(f"The safety checker of {self.info.model_id} blanked the edited image.",
                             hint="Use another seed or instruction, or another editor; a black image would "
                                  "corrupt the explanation.")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.model_id!r})"


class FluxKontextEditor(DiffusersEditor):
    family = "diffusers-flux-kontext"
    pipeline_classes = ("FluxKontextPipeline",)
    default_steps = 28  # the pipeline's default
    default_guidance = 2.5  # the FLUX.1-Kontext-dev model card / diffusers example
    # FluxKontextPipeline's default `max_area=1024**2` and its rounding (pipeline_flux_kontext.py, diffusers 0.42).
    preferred_area = 1024 * 1024
    preferred_rounding = "floor"

    def call_kwargs(self, image, instruction, width, height, steps, guidance):
        kwargs = dict(image=image, prompt=instruction, width=width, height=height, num_inference_steps=steps,
                      guidance_scale=guidance, max_area=width * height)
        if "_auto_resize" in inspect.signature(self.pipe.__call__).parameters:
            kwargs["_auto_resize"] = False
        if "max_sequence_length" in self.options:
            kwargs["max_sequence_length"] = int(self.options["max_sequence_length"])
        return kwargs

    # Prompt embeddings kept per instruction (T5-XXL at 512 tokens: 4 MiB each in bf16, on the editor's device).
    prompt_cache_size: ClassVar[int] = 16

    def encode_prompts(self, kwargs: dict) -> dict:
        """T5 and CLIP run once per instruction: their embeddings are kept (the last `prompt_cache_size`
        instructions) and passed as prompt_embeds / pooled_prompt_embeds, which FluxKontextPipeline uses
        unchanged, so a repeated instruction (another seed, another image, a batch) skips both encoders (and,
        under CPU offload, moving them to the GPU)."""
        import torch

        prompts = kwargs.pop("prompt")
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        length = int(kwargs.get("max_sequence_length", self._default_sequence_length()))
        cache = self._prompt_cache
        embeds, pooled = [], []
        for prompt in prompts:
            key = (prompt, length)
            if key not in cache:
                e, p, _ = self.pipe.encode_prompt(prompt=[prompt], prompt_2=None, max_sequence_length=length)
                cache[key] = (e, p)
                while len(cache) > self.prompt_cache_size:
                    cache.popitem(last=False)
            cache.move_to_end(key)
            embeds.append(cache[key][0])
            pooled.append(cache[key][1])
        return {**kwargs, "prompt_embeds": torch.cat(embeds), "pooled_prompt_embeds": torch.cat(pooled)}

    def _default_sequence_length(self) -> int:
        return int(inspect.signature(self.pipe.__call__).parameters["max_sequence_length"].default)


class QwenImageEditEditor(DiffusersEditor):
    """Qwen-Image-Edit (QwenImageEditPipeline) and its 2509/2511 updates (QwenImageEditPlusPipeline).

    `guidance` is the true classifier-free guidance scale; it needs a negative prompt, which the model
    cards set to a single space."""

    family = "diffusers-qwen-image-edit"
    pipeline_classes = ("QwenImageEditPipeline", "QwenImageEditPlusPipeline")
    default_steps = 50  # Qwen-Image-Edit model card; the 2509/2511 cards use 40
    default_guidance = 4.0
    # `calculate_dimensions(1024 * 1024, ratio)` with multiples of 32 (pipeline_qwenimage_edit[_plus].py).
    preferred_area = 1024 * 1024
    preferred_rounding = "nearest"
    preferred_multiple = 32

    def steps_for_pipeline(self) -> int:
        return 40 if self._plus else 50

    @property
    def _plus(self) -> bool:
        return type(self.pipe).__name__ == "QwenImageEditPlusPipeline"

    @property
    def batches_images(self) -> bool:
        # QwenImageEditPlusPipeline reads a list of images as several conditioning images of one edit.
        return not self._plus

    def call_kwargs(self, image, instruction, width, height, steps, guidance):
        negative = self.options.get("negative_prompt", " ")
        if isinstance(instruction, list):  # edit_batch / edit_images: one negative prompt per instruction
            negative = [negative] * len(instruction)
        return dict(image=image, prompt=instruction, negative_prompt=negative,
                    width=width, height=height, num_inference_steps=steps, true_cfg_scale=guidance)


class InstructPix2PixEditor(DiffusersEditor):
    """InstructPix2Pix: the output has the input image's size, so the input is resized to the working size."""

    family = "diffusers-instruct-pix2pix"
    pipeline_classes = ("StableDiffusionInstructPix2PixPipeline",)
    default_steps = 20
    default_guidance = 7.5  # text guidance; image guidance below
    default_image_guidance = 1.5
    # InstructPix2Pix was fine-tuned at 512 x 512 (Brooks et al., 2023); keep that area at the input's shape.
    preferred_area = 512 * 512
    preferred_rounding = "nearest"

    @property
    def size_multiple(self) -> int:
        return int(self.pipe.vae_scale_factor)

    def call_kwargs(self, image, instruction, width, height, steps, guidance):
        if isinstance(instruction, list) and not isinstance(image, list):
            image = [image] * len(instruction)  # edit_batch: one image per prompt (a single one is deprecated)
        return dict(image=image, prompt=instruction, num_inference_steps=steps, guidance_scale=guidance,
                    image_guidance_scale=float(self.options.get("image_guidance", self.default_image_guidance)))


# -- loading (the shared steps are in diffusers_loading.py) -----------------------------------------------

def _load(editor_cls: type[DiffusersEditor], spec: ModelSpec, options: LoadOptions) -> DiffusersEditor:
    quantize = quantize_choice(spec.options)
    check_device(quantize, resolve_device(options.device))  # before any weights are read
    loaded = load_pipeline(spec, options, role="editor", accepted=editor_cls.pipeline_classes,
                           expected=f"a {editor_cls.family} editor",
                           before_placing=(lambda pipe, _device: quantize_pipeline(pipe, quantize, spec.model_id))
                           if quantize else None)
    if spec.options.get("attention_backend"):
        _set_attention_backend(loaded.pipe, str(spec.options["attention_backend"]), spec.model_id)
    info = ModelInfo(model_id=quantized_model_id(spec.model_id, quantize), family=editor_cls.family,
                     revision=loaded.revision or spec.revision,
                     extra={**loaded.extra(), "defaults_version": editor_cls.defaults_version})
    return editor_cls(loaded.pipe, info, spec.options)


def _set_attention_backend(pipe: Any, backend: str, model_id: str) -> None:
    """Option `attention_backend`: the denoiser's attention kernel through diffusers' attention dispatcher
    (default: diffusers' own choice, PyTorch SDPA). E.g. "_native_flash", "_native_cudnn" (SDPA kernels), or
    "flash" / "sage" when those packages are installed. Only the speed changes, up to float rounding."""
    from diffusers.models.attention_dispatch import AttentionBackendName

    choices = [b.value for b in AttentionBackendName]
    if backend not in choices:
        raise ConfigError(f"Unknown attention backend '{backend}' for {model_id}.",
                          hint=f"Use one of: {', '.join(choices)}.")
    denoisers = [c for c in pipe.components.values() if callable(getattr(c, "set_attention_backend", None))]
    try:
        for component in denoisers:
            component.set_attention_backend(backend)
    except (ImportError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"The attention backend '{backend}' is not usable here.",
                          hint="Leave the option unset for PyTorch's SDPA, or install the package the backend "
                               "needs (e.g. flash-attn for 'flash').", detail=str(exc)) from exc


for _cls in (FluxKontextEditor, QwenImageEditEditor, InstructPix2PixEditor):
    register_family("editor", _cls.family)(lambda spec, options, _cls=_cls: _load(_cls, spec, options))
