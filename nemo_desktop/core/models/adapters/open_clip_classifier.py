"""open_clip zero-shot classifiers: family ("classifier", "open_clip").

Sources (`ModelSpec.source`):
  * `hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K` (`@revision` or spec.revision pins it): its
    open_clip_config.json, weights (safetensors first) and tokenizer files are fetched into the Hugging Face
    cache and loaded from the snapshot folder as `local-dir:`;
  * `local-dir:/path`: a folder with open_clip_config.json + open_clip_model.safetensors (open_clip's layout);
  * `<model name>@<pretrained>`: a built-in or registered architecture (options["config_dir"] is passed to
    `open_clip.add_model_config` first) with a pretrained tag (`ViT-B-32@laion2b_s34b_b79k`) or a
    checkpoint file (`nemo-tiny@/path/weights.safetensors`); options["pretrained"] may replace the suffix.
Random weights are never used silently: a source without weights is an error. Zero-shot behaviour
(prompts, per-call overrides, probabilities) is shared with the Hugging Face adapters in
`nemo_desktop/core/models/zero_shot.py`; models with a learned logit bias (open_clip SigLIP) get the SigLIP
prompt template by default.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...base.errors import ConfigError, ModelError, WeightsNotFoundError
from ..batching import oom_guard
from ...base.device import resolve_device, resolve_dtype
from ..fast_paths import fast_paths_for
from ..hub_files import cache_dir_for, commit_from_path, fetch_file, fetch_first, weights_revision
from ..protocols import ModelInfo
from ..families import LoadOptions, ModelSpec, register_family
from ..zero_shot import CLIP_TEMPLATE, SIGLIP_TEMPLATE, ZeroShotClassifierBase, zero_shot_class_names
from .spec_checks import LOCAL_DIR, local_folder

_WEIGHTS = ("open_clip_model.safetensors", "open_clip_pytorch_model.safetensors", "open_clip_pytorch_model.bin")
# open_clip's own preference when it picks the checkpoint of a local-dir (factory._find_checkpoint_in_dir)
_LOCAL_WEIGHTS = _WEIGHTS + ("open_clip_pytorch_model.pth", "model.safetensors", "pytorch_model.bin",
                             "pytorch_model.pth", "model.pth")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "spiece.model",
                    "vocab.json", "merges.txt")


class OpenClipClassifier(ZeroShotClassifierBase):
    """An open_clip model, its eval transform and tokenizer behind the ZeroShotClassifier protocol."""

    def __init__(self, model: Any, transform: Any, tokenizer: Any, class_names: Sequence[str], info: ModelInfo, *,
                 device: str, dtype: Any, template: str | None = None, **kw):
        with oom_guard(f"Loading {info.model_id}"):
            self.model = model.to(device=device, dtype=dtype).eval()
        self.fast = fast_paths_for(None, device, dtype)  # pinned, non-blocking copies on CUDA
        self.transform = transform
        self.tokenizer = tokenizer
        self.logit_scale = float(model.logit_scale.detach().float().exp())
        bias = getattr(model, "logit_bias", None)
        self.logit_bias = float(bias.detach().float()) if bias is not None else None
        template = template or (SIGLIP_TEMPLATE if self.logit_bias is not None else CLIP_TEMPLATE)
        super().__init__(class_names, info, device=device, dtype=dtype, template=template, **kw)

    def __repr__(self) -> str:
        return f"OpenClipClassifier({self.info.model_id!r}, classes={len(self.class_names)}, device={self.device!r})"

    def _host_pixels(self, images):
        import torch

        return torch.stack([self.transform(im) for im in images])

    @property
    def input_side(self) -> int | None:
        size = getattr(getattr(self.model, "visual", None), "image_size", None)
        return int(max(size)) if isinstance(size, (tuple, list)) else (int(size) if size else None)

    def _image_features(self, pixel_values):
        return self.model.encode_image(pixel_values)

    # -- differentiable extension (competency estimation differentiates from [0, 1] pixels) -----------------
    def _split_transform(self):
        """(the eval transform without its final Normalize, that Normalize): open_clip ends with one."""
        steps = list(getattr(self.transform, "transforms", []))
        if not steps or type(steps[-1]).__name__ != "Normalize":
            raise ModelError(f"{self.info.model_id}: its preprocessing does not end in Normalize, so the "
                             "competency analyses cannot take gradients from [0, 1] pixels.")
        return type(self.transform)(steps[:-1]), steps[-1]

    def unit_tensor(self, images):
        import torch

        to_unit, _ = self._split_transform()
        rgb = [im if im.mode == "RGB" else im.convert("RGB") for im in images]
        return torch.stack([to_unit(im) for im in rgb]).to(device=self.device).float()

    def _unit_mean_std(self):
        _, norm = self._split_transform()
        return norm.mean, norm.std

    def _text_features(self, prompts: list[str]):
        return self.model.encode_text(self.tokenizer(prompts).to(self.device))


@register_family("classifier", "open_clip")
def load_open_clip(spec: ModelSpec, options: LoadOptions) -> OpenClipClassifier:
    import open_clip

    device = resolve_device(options.device)
    dtype = resolve_dtype(options.dtype, device)
    opts = dict(spec.options)
    name, pretrained, revision, weights = _resolve(spec, options, opts)
    try:
        model, _, transform = open_clip.create_model_and_transforms(name, pretrained=pretrained,
                                                                    cache_dir=cache_dir_for(options))
        tokenizer = open_clip.get_tokenizer(name, cache_dir=cache_dir_for(options))
    except (RuntimeError, ValueError, FileNotFoundError, KeyError, OSError) as exc:
        raise ModelError(f"open_clip could not build '{spec.source}'.", hint="Check the model name, pretrained "
                         "tag or folder (run with -v for detail).", detail=repr(exc)) from exc
    info = ModelInfo(model_id=spec.model_id, family="open_clip", revision=revision,
                     extra={"source": spec.source, "architecture": name, "weights": weights, "device": device,
                            "dtype": str(dtype).replace("torch.", "")})
    return OpenClipClassifier(model, transform, tokenizer, zero_shot_class_names(opts), info, device=device,
                              dtype=dtype, template=opts.get("template"), prompts=opts.get("prompts"),
                              batch_size=opts.get("batch_size", 32))


def _resolve(spec: ModelSpec, options: LoadOptions, opts: dict) -> tuple[str, str | None, str | None, str | None]:
    """(model name for open_clip, pretrained argument, revision, weights description)."""
    source = spec.source.strip()
    if source.startswith("hf-hub:"):
        repo, _, inline_rev = source[len("hf-hub:"):].partition("@")
        config = fetch_file(repo, "open_clip_config.json", options, revision=spec.revision or inline_rev or None,
                            model_id=spec.catalog_id)
        commit = commit_from_path(config)
        weights = fetch_first(repo, _WEIGHTS, options, revision=commit or spec.revision or inline_rev or None,
                              model_id=spec.catalog_id)
        for extra in _TOKENIZER_FILES:  # only present for HF-tokenizer models (e.g. SigLIP); absent is fine
            fetch_file(repo, extra, options, revision=commit, required=False)
        return f"local-dir:{config.parent}", None, commit, str(weights)
    if source.startswith(LOCAL_DIR):
        folder = local_folder(source, "open_clip_config.json", "an open_clip model folder",
                              hint="Use `<model name>@<checkpoint>` with options['config_dir'] for a bare "
                                   "checkpoint and a model config JSON.")
        weights = next((folder / n for n in _LOCAL_WEIGHTS if (folder / n).is_file()), None)
        if weights is None:  # open_clip would build the model with random weights and only log a warning
            raise WeightsNotFoundError(f"No open_clip weights in {folder}.",
                                       hint=f"Expected one of: {', '.join(_LOCAL_WEIGHTS[:4])}.")
        return f"local-dir:{folder}", None, weights_revision(weights), str(weights)
    return _named(source, spec, options, opts)


def _named(source: str, spec: ModelSpec, options: LoadOptions, opts: dict):
    import open_clip

    if opts.get("config_dir"):
        config_dir = Path(opts["config_dir"]).expanduser()
        if not config_dir.exists():
            raise ConfigError(f"open_clip config folder not found: {config_dir}")
        open_clip.add_model_config(config_dir)
    name, _, pretrained = source.partition("@")
    pretrained = opts.get("pretrained") or pretrained
    if open_clip.get_model_config(name) is None:
        raise ConfigError(f"'{name}' is not an open_clip model.",
                          hint="Use a name from open_clip.list_models(), register a model config JSON with "
                               "options['config_dir'], or use hf-hub:<repo> / local-dir:<folder>.")
    if not pretrained:
        tags = ", ".join(open_clip.list_pretrained_tags_by_model(name)[:6]) or "none"
        raise ConfigError(f"open_clip model '{name}' needs pretrained weights.",
                          hint=f"Write {name}@<tag or checkpoint file>; known tags: {tags}.")
    file = Path(pretrained).expanduser()
    if file.is_file():
        return name, str(file), weights_revision(file), str(file)
    cfg = open_clip.get_pretrained_cfg(name, pretrained)
    if not cfg:
        raise ConfigError(f"'{pretrained}' is neither a checkpoint file nor a pretrained tag of '{name}'.",
                          hint=f"Known tags: {', '.join(open_clip.list_pretrained_tags_by_model(name)) or 'none'}.")
    commit = None
    if cfg.get("hf_hub"):  # fetch through our helper for clear offline/gated errors and the commit hash
        repo, filename = _split_hub(cfg["hf_hub"])
        weights = fetch_first(repo, [filename] if filename else list(_WEIGHTS), options, revision=spec.revision,
                              model_id=spec.catalog_id)
        commit = commit_from_path(weights)
    return name, pretrained, commit, f"{name}@{pretrained}"


def _split_hub(hf_hub: str) -> tuple[str, str]:
    """'org/repo/' -> ('org/repo', ''); 'org/repo/file.bin' -> ('org/repo', 'file.bin')."""
    parts = hf_hub.strip("/").split("/")
    return "/".join(parts[:2]), "/".join(parts[2:])
