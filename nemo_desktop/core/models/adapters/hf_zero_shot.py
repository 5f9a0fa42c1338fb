"""Hugging Face CLIP and SigLIP zero-shot classifiers: families ("classifier", "hf-clip") and
("classifier", "hf-siglip").

Source: a Hub repo id (`openai/clip-vit-base-patch32`, `google/siglip-base-patch16-224`; `repo@revision`
or spec.revision pins it) or a folder saved with `model.save_pretrained` + `processor.save_pretrained`.
Loaded with CLIPModel / SiglipModel and AutoProcessor. Class names come from options["class_file"],
["class_names"] or ["vocabulary"] (default ImageNet-1k); options["template"] sets the prompt template
(default "a photo of a {}." for CLIP, "This is a photo of {}." for SigLIP, the template of SigLIP's model
card). Prompts, per-call overrides and how SigLIP's sigmoid scores become class probabilities (a softmax
over its logits; the bias cancels and the ranking equals the sigmoid ranking) are explained and
implemented once in `nemo_desktop/core/models/zero_shot.py`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...base.errors import ConfigError, ModelError, WeightsNotFoundError
from ...base.device import resolve_device, resolve_dtype
from ..fast_paths import fast_paths_for
from ..batching import oom_guard
from ..downloads import translate_hub_error
from ..hub_files import cache_dir_for, commit_from_path, fetch_file, offline_requested, weights_revision
from ..protocols import ModelInfo
from ..families import LoadOptions, ModelSpec, register_family
from ..zero_shot import CLIP_TEMPLATE, SIGLIP_TEMPLATE, ZeroShotClassifierBase, zero_shot_class_names

_FAMILIES = {"hf-clip": ("clip", CLIP_TEMPLATE), "hf-siglip": ("siglip", SIGLIP_TEMPLATE)}


class HFZeroShotClassifier(ZeroShotClassifierBase):
    """CLIPModel / SiglipModel + its processor behind the ZeroShotClassifier protocol."""

    def __init__(self, model: Any, processor: Any, class_names: Sequence[str], info: ModelInfo, *,
                 device: str, dtype: Any, template: str, siglip: bool, **kw):
        with oom_guard(f"Loading {info.model_id}"):
            self.model = model.to(device=device, dtype=dtype).eval()
        self.fast = fast_paths_for(None, device, dtype)  # pinned, non-blocking copies on CUDA
        self.processor = processor
        self.siglip = siglip
        self.max_text_length = int(model.config.text_config.max_position_embeddings)
        self.logit_scale = float(model.logit_scale.detach().float().exp())
        self.logit_bias = float(model.logit_bias.detach().float()) if siglip else None
        super().__init__(class_names, info, device=device, dtype=dtype, template=template, **kw)

    def __repr__(self) -> str:
        return f"HFZeroShotClassifier({self.info.model_id!r}, classes={len(self.class_names)}, device={self.device!r})"

    def _host_pixels(self, images):
        return self.processor.image_processor(images=list(images), return_tensors="pt")["pixel_values"]

    @property
    def input_side(self) -> int | None:
        return int(getattr(self.model.config.vision_config, "image_size", 0)) or None

    def _image_features(self, pixel_values):
        return _pooled(self.model.get_image_features(pixel_values=pixel_values))

    # -- differentiable extension (competency estimation differentiates from [0, 1] pixels) -----------------
    def unit_tensor(self, images):
        """(N, 3, H, W) in [0, 1]: the processor's resize/crop and rescale, without its normalisation."""
        rgb = [im if im.mode == "RGB" else im.convert("RGB") for im in images]
        batch = self.processor.image_processor(images=rgb, do_normalize=False, return_tensors="pt")
        return batch["pixel_values"].to(device=self.device).float()

    def _unit_mean_std(self):
        ip = self.processor.image_processor
        return ip.image_mean, ip.image_std

    def _text_features(self, prompts: list[str]):
        # SigLIP was trained on max_length-padded text without an attention mask (its model card's usage).
        tokens = self.processor.tokenizer(prompts, padding="max_length" if self.siglip else True, truncation=True,
                                          max_length=self.max_text_length, return_tensors="pt")
        kwargs = {"input_ids": tokens["input_ids"].to(self.device)}
        if not self.siglip and "attention_mask" in tokens:
            kwargs["attention_mask"] = tokens["attention_mask"].to(self.device)
        return _pooled(self.model.get_text_features(**kwargs))


def _pooled(output):
    """transformers 5 returns a model output whose pooler_output is the projected embedding."""
    return output if not hasattr(output, "pooler_output") else output.pooler_output


def _load(spec: ModelSpec, options: LoadOptions, family: str) -> HFZeroShotClassifier:
    from transformers import AutoConfig, AutoProcessor, CLIPModel, SiglipModel

    model_type, default_template = _FAMILIES[family]
    device = resolve_device(options.device)
    dtype = resolve_dtype(options.dtype, device)
    where, revision, load_kw = _locate(spec, options)
    try:
        config = AutoConfig.from_pretrained(where, **load_kw)
    except (OSError, ValueError) as exc:
        raise _load_error(spec, options, exc) from exc
    if config.model_type != model_type:
        other = next((f for f, (t, _) in _FAMILIES.items() if t == config.model_type), None)
        raise ConfigError(f"{spec.source} is a '{config.model_type}' model, not a {model_type.upper()} model.",
                          hint=f"Load it with the family '{other}'." if other else
                          "Family hf-clip takes CLIP checkpoints, hf-siglip takes SigLIP checkpoints.")
    model_cls = SiglipModel if model_type == "siglip" else CLIPModel
    try:
        model = model_cls.from_pretrained(where, **load_kw)
        processor = AutoProcessor.from_pretrained(where, **load_kw)
    except (OSError, ValueError) as exc:
        raise _load_error(spec, options, exc) from exc
    opts = spec.options
    info = ModelInfo(model_id=spec.model_id, family=family, revision=revision,
                     extra={"source": spec.source, "device": device, "dtype": str(dtype).replace("torch.", ""),
                            "logit_bias": model_type == "siglip"})
    return HFZeroShotClassifier(model, processor, zero_shot_class_names(opts), info, device=device, dtype=dtype,
                                template=opts.get("template") or default_template, siglip=model_type == "siglip",
                                prompts=opts.get("prompts"), batch_size=opts.get("batch_size", 32))


def _locate(spec: ModelSpec, options: LoadOptions) -> tuple[str, str | None, dict]:
    """(what to give from_pretrained, revision for ModelInfo, from_pretrained kwargs)."""
    folder = Path(spec.source).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ConfigError(f"{folder} has no config.json.", hint="Save the model with model.save_pretrained() "
                              "and processor.save_pretrained() into the folder.")
        weights = next((folder / n for n in ("model.safetensors", "pytorch_model.bin") if (folder / n).is_file()),
                       None)
        revision = commit_from_path(folder / "config.json") or (weights_revision(weights) if weights else None)
        return str(folder), revision, {}
    repo, _, inline_rev = spec.source.partition("@")
    config = fetch_file(repo, "config.json", options, revision=spec.revision or inline_rev or None,
                        model_id=spec.catalog_id)
    commit = commit_from_path(config)
    return repo, commit, {"revision": commit or spec.revision or inline_rev or None,
                          "cache_dir": cache_dir_for(options), "local_files_only": offline_requested(options)}


def _load_error(spec: ModelSpec, options: LoadOptions, exc: Exception) -> Exception:
    if Path(spec.source).expanduser().is_dir():
        return ModelError(f"transformers could not load the model folder {spec.source}.",
                          hint="The folder must hold the model and its processor, both saved with "
                               "save_pretrained() (run with -v for detail).", detail=repr(exc))
    hub_error = translate_hub_error(exc, spec.source.partition("@")[0])
    if hub_error is not None:
        return hub_error
    if offline_requested(options):
        return WeightsNotFoundError(f"Parts of {spec.source} are missing from the local Hugging Face cache.",
                                    hint="Download the model again while online (`nemo models download`), or "
                                         "unset HF_HUB_OFFLINE.", detail=repr(exc))
    return ModelError(f"transformers could not load {spec.source}.", hint="Check that the repository holds a "
                      "complete model and processor (run with -v for detail).", detail=repr(exc))


@register_family("classifier", "hf-clip")
def load_hf_clip(spec: ModelSpec, options: LoadOptions) -> HFZeroShotClassifier:
    return _load(spec, options, "hf-clip")


@register_family("classifier", "hf-siglip")
def load_hf_siglip(spec: ModelSpec, options: LoadOptions) -> HFZeroShotClassifier:
    return _load(spec, options, "hf-siglip")
