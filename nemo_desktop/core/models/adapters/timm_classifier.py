"""timm image classifiers: family ("classifier", "timm").

Sources (`ModelSpec.source`):
  * `hf-hub:timm/vit_base_patch16_224.augreg2_in21k_ft_in1k` (a `@revision` suffix or spec.revision pins it),
    or a bare Hub repo id `timm/resnet50.a1_in1k`;
  * a timm model name with pretrained tag, `resnet50.a1_in1k` (its Hub weights);
  * `local-dir:/path`: a folder saved with `timm.models.save_for_hf` (config.json + weights);
  * `checkpoint:<architecture>:/path/weights.safetensors|.pth`, or options {"architecture", "checkpoint"}:
    a user's fine-tuned weights (`.pth` loaded with weights_only=True) plus class names from
    options["class_file"] (one name per line), ["class_names"] or ["vocabulary"].
Hub models are fetched file by file into the Hugging Face cache and loaded from the snapshot folder with
`local-dir:`, so hub and disk share one loading path. Preprocessing is the model's own data config.
Options: batch_size (32), class_file / class_names / vocabulary, model_args (extra create_model kwargs),
data_config (overrides for timm.data.resolve_model_data_config, e.g. {"crop_pct": 1.0}),
autocast ("off" | "bf16": bf16 autocast for float32 weights on a bf16-capable GPU; see models/fast_paths.py).
"""
from __future__ import annotations

import difflib
import logging
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...base.errors import ConfigError, ModelError, WeightsNotFoundError
from ..batching import batched, l2_normalize, oom_guard
from ...base.device import free_memory, resolve_device, resolve_dtype
from ..fast_paths import fast_paths_for, host_to_device, to_memory_format
from ..hub_files import cache_dir_for, commit_from_path, fetch_file, fetch_first, weights_revision
from ..outputs import ClassifierOutputs
from ..protocols import ModelInfo
from ..families import LoadOptions, ModelSpec, register_family
from ..vocab import load_vocabulary, read_class_file
from .spec_checks import LOCAL_DIR, local_folder

log = logging.getLogger(__name__)

_WNID_RE = re.compile(r"^n\d{8}$")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "pytorch_model.pth", "model.pth")
_CHECKPOINT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin")


class TimmClassifier:
    """A timm model behind the Classifier protocol."""

    zero_shot = False

    def __init__(self, model: Any, class_names: Sequence[str], info: ModelInfo, *, device: str, dtype: Any,
                 batch_size: int = 32, data_config: Mapping[str, Any] | None = None, autocast: str = "off"):
        import timm.data
        import torch

        if len(class_names) != model.num_classes:
            raise ModelError(f"{info.model_id} has {model.num_classes} outputs but {len(class_names)} class names.",
                             hint="Give a class-name file with exactly one name per model output.")
        self.fast = fast_paths_for(model, device, dtype, autocast=autocast)
        with oom_guard(f"Loading {info.model_id}"):
            self.model = model.to(device=device, dtype=dtype).eval()
            if self.fast.channels_last:
                self.model = self.model.to(memory_format=torch.channels_last)
        self.class_names = list(class_names)
        self.info = info
        self.device = device
        self.dtype = dtype
        self.batch_size = int(batch_size)
        self.data_config = timm.data.resolve_model_data_config(self.model, args=dict(data_config or {}))
        # timm's own eval transform up to a uint8 tensor; ToTensor's /255 and Normalize then run once per
        # batch on the device (identical values, 1.2-4x faster on the CPU, and on the GPU when there is one).
        self.transform = timm.data.create_transform(**self.data_config, is_training=False, normalize=False)
        self._mean = torch.tensor(self.data_config["mean"], device=device).view(1, -1, 1, 1) * 255
        self._std = torch.tensor(self.data_config["std"], device=device).view(1, -1, 1, 1) * 255

    def __repr__(self) -> str:
        return f"TimmClassifier({self.info.model_id!r}, classes={len(self.class_names)}, device={self.device!r})"

    # -- Classifier protocol -------------------------------------------------------------------------------
    def preprocess(self, images: Sequence[Any]):
        return self.to_device(self.prepare_batch(images))

    def prepare_batch(self, images: Sequence[Any]):
        """The CPU half of preprocessing (resize, crop, uint8 tensor): thread-safe, runs in loader workers."""
        import torch

        batch = torch.stack([self.transform(im if im.mode == "RGB" else im.convert("RGB")) for im in images])
        return batch.pin_memory() if self.fast.pin_memory else batch

    def to_device(self, host_batch):
        """The device half: copy, then /255 and Normalize once per batch, in the model's dtype and layout."""
        batch = host_to_device(host_batch, self.device, self.fast).float()
        return to_memory_format(batch.sub_(self._mean).div_(self._std).to(self.dtype), self.fast)

    @property
    def input_side(self) -> int:
        """The longer side of the network's input (for JPEG draft-mode decoding)."""
        return int(max(self.data_config["input_size"][1:]))

    def forward_logits(self, pixel_values):
        """Differentiable (N, C) logits; call outside torch.inference_mode to get gradients."""
        with oom_guard(f"The classifier {self.info.model_id}"):
            return self.model(pixel_values)

    def predict_proba(self, images: Sequence[Any], *, class_prompts: Mapping[int, str] | None = None) -> np.ndarray:
        if class_prompts:
            raise ConfigError(f"{self.info.model_id} is not a zero-shot classifier: it has no class prompts to "
                              "replace.", hint="Prompt interventions need a CLIP/SigLIP/open_clip classifier; "
                                               "use an image intervention for timm models.")
        return self._collect(images, self.predict_proba_from_pixels, len(self.class_names))

    def embed(self, images: Sequence[Any]) -> np.ndarray:
        return self._collect(images, self.embed_from_pixels, self.model.num_features)

    def predict_with_embeddings(self, images: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """(probabilities, unit embeddings) from one forward pass per batch."""
        if len(images) == 0:
            return np.zeros((0, len(self.class_names)), np.float32), np.zeros((0, self.model.num_features), np.float32)
        with oom_guard(f"The classifier {self.info.model_id}"):
            out = ClassifierOutputs.concat([self.outputs_from_pixels(self.preprocess(chunk))
                                            for chunk in batched(images, self.batch_size)], len(self.class_names))
        return out.probs, out.embeddings

    # -- tensor-level entry points (benchmarks, Grad-CAM helpers) ------------------------------------------
    def logits(self, images: Sequence[Any]) -> np.ndarray:
        return self._collect(images, self.logits_from_pixels, len(self.class_names))

    def logits_from_pixels(self, pixel_values) -> np.ndarray:
        import torch

        with oom_guard(f"The classifier {self.info.model_id}"), torch.inference_mode():
            return self.model(pixel_values).float().cpu().numpy()

    def predict_proba_from_pixels(self, pixel_values) -> np.ndarray:
        import torch

        with oom_guard(f"The classifier {self.info.model_id}"), torch.inference_mode():
            return torch.softmax(self.model(pixel_values).float(), dim=-1).cpu().numpy()

    def embed_from_pixels(self, pixel_values) -> np.ndarray:
        import torch

        with oom_guard(f"The classifier {self.info.model_id}"), torch.inference_mode():
            feats = self.model.forward_head(self.model.forward_features(pixel_values), pre_logits=True)
            return l2_normalize(feats.flatten(1)).cpu().numpy()

    def outputs_from_pixels(self, pixel_values) -> ClassifierOutputs:
        """Logits, probabilities and unit embeddings of one batch: the backbone runs once; its features go
        through the head twice (pre-logits, then logits), because timm heads differ per architecture (pooling,
        norms, MLP heads) and only forward_head knows both ends; the head costs well under 1% of the pass."""
        import torch

        with oom_guard(f"The classifier {self.info.model_id}"), torch.inference_mode(), \
                self.fast.autocast(self.device):
            features = self.model.forward_features(pixel_values)
            pre = self.model.forward_head(features, pre_logits=True)
            logits = self.model.forward_head(features).float()
            return ClassifierOutputs(logits.cpu().numpy(), torch.softmax(logits, dim=-1).cpu().numpy(),
                                     l2_normalize(pre.flatten(1)).cpu().numpy())

    # -- differentiable extension (competency estimation differentiates from [0, 1] pixels) -----------------
    def unit_tensor(self, images: Sequence[Any]):
        """(N, 3, H, W) float in [0, 1] after timm's eval resize/crop, on the model's device."""
        import torch

        tensors = [self.transform(im if im.mode == "RGB" else im.convert("RGB")) for im in images]
        return torch.stack(tensors).to(device=self.device).float().div_(255.0)

    def _normalise_unit(self, x):
        return ((x * 255.0 - self._mean) / self._std).to(self.dtype)

    def logits_from_unit(self, x):
        with oom_guard(f"The classifier {self.info.model_id}"):
            return self.model(self._normalise_unit(x))

    def features_from_unit(self, x):
        """The pre-logits features (what the classifier head reads), differentiable in x."""
        with oom_guard(f"The classifier {self.info.model_id}"):
            feats = self.model.forward_features(self._normalise_unit(x))
            return self.model.forward_head(feats, pre_logits=True).flatten(1)

    def unload(self) -> None:
        """Release the weights (GPU memory included); the object is unusable afterwards."""
        self.model = None
        free_memory()

    def _collect(self, images: Sequence[Any], fn, width: int) -> np.ndarray:
        if len(images) == 0:
            return np.zeros((0, width), dtype=np.float32)
        with oom_guard(f"The classifier {self.info.model_id}"):  # covers the batch's copy to the device
            parts = [fn(self.preprocess(chunk)) for chunk in batched(images, self.batch_size)]
        return np.concatenate(parts).astype(np.float32, copy=False)


# -- loading ---------------------------------------------------------------------------------------------

@register_family("classifier", "timm")
def load_timm_classifier(spec: ModelSpec, options: LoadOptions) -> TimmClassifier:
    device = resolve_device(options.device)
    dtype = resolve_dtype(options.dtype, device)
    opts = dict(spec.options)
    source = spec.source.strip()
    if source.startswith("checkpoint:") or opts.get("checkpoint"):
        model, names, revision, weights = _load_user_checkpoint(source, opts)
    else:
        model, revision, weights = _load_pretrained(source, spec.revision, options, opts.get("model_args") or {},
                                                    spec.catalog_id)
        names = _class_names_for(model, opts)
    info = ModelInfo(model_id=spec.model_id, family="timm", revision=revision,
                     extra={"architecture": model.pretrained_cfg.get("architecture") or type(model).__name__,
                            "num_classes": model.num_classes, "source": source, "weights": weights,
                            "device": device, "dtype": str(dtype).replace("torch.", "")})
    return TimmClassifier(model, names, info, device=device, dtype=dtype,
                          batch_size=opts.get("batch_size", 32), data_config=opts.get("data_config"),
                          autocast=opts.get("autocast", "off"))


def _load_pretrained(source: str, revision: str | None, options: LoadOptions, model_args: dict,
                     catalog_id: str | None = None):
    import timm

    local_dir, commit = _resolve_folder(source, revision, options, catalog_id)
    if local_dir is None:  # a timm name whose weights are not on the Hub (legacy URL weights)
        with _timm_errors(source):
            model = timm.create_model(source, pretrained=True, cache_dir=cache_dir_for(options), **model_args)
        return model, None, None
    weights = _weights_in(local_dir)
    with _timm_errors(source):
        model = timm.create_model(f"local-dir:{local_dir}", pretrained=True, **model_args)
    return model, commit or weights_revision(weights), str(weights)


def _resolve_folder(source: str, revision: str | None, options: LoadOptions,
                    catalog_id: str | None = None) -> tuple[Path | None, str | None]:
    """(local folder with config.json + weights, commit hash when it came from the Hub cache)."""
    if source.startswith(LOCAL_DIR):
        folder = local_folder(source, "config.json", "a timm model folder",
                              hint="Save the model with timm.models.save_for_hf(model, folder), or give "
                                   "`checkpoint:<architecture>:<file>` for a bare weights file.")
        return folder, commit_from_path(folder / "config.json")
    if source.startswith("hf-hub:"):
        repo = source[len("hf-hub:"):]
    elif Path(source).expanduser().is_dir():
        return _resolve_folder(f"local-dir:{source}", revision, options)
    elif "/" in source:
        repo = source
    else:
        repo = _hub_id_for_name(source)
        if repo is None:
            return None, None
    repo, _, inline_rev = repo.partition("@")
    config = fetch_file(repo, "config.json", options, revision=revision or inline_rev or None, model_id=catalog_id)
    commit = commit_from_path(config)
    fetch_first(repo, ["model.safetensors", "pytorch_model.bin"], options, revision=commit or revision,
                model_id=catalog_id)
    return config.parent, commit


def _hub_id_for_name(name: str) -> str | None:
    import timm
    from timm.models import get_pretrained_cfg

    if not timm.is_model(name.split(".")[0]):
        close = difflib.get_close_matches(name.split(".")[0], timm.list_models(), n=6, cutoff=0.6)
        raise ConfigError(f"'{name}' is not a timm model.",
                          hint=("Similar timm models: " + ", ".join(close)) if close else
                          "Use a timm model name (timm.list_models()), `hf-hub:<repo>` or `local-dir:<folder>`.")
    try:
        cfg = get_pretrained_cfg(name)
    except RuntimeError:  # an unknown pretrained tag
        cfg = None
    if cfg is None:
        raise ConfigError(f"timm has no pretrained weights called '{name}'.",
                          hint=f"List the tags with timm.list_pretrained('{name.split('.')[0]}*').")
    return cfg.hf_hub_id or None


def _weights_in(folder: Path) -> Path:
    for name in _WEIGHT_FILES:
        if (folder / name).is_file():
            return folder / name
    for suffix in _CHECKPOINT_SUFFIXES:
        found = sorted(folder.glob(f"*{suffix}"))
        if found:
            return found[0]
    raise WeightsNotFoundError(f"No weights file in {folder}.",
                               hint="Expected model.safetensors (or pytorch_model.bin) next to config.json.")


def _load_user_checkpoint(source: str, opts: dict):
    import timm
    from timm.models import load_state_dict

    if source.startswith("checkpoint:"):
        arch, sep, path = source[len("checkpoint:"):].partition(":")
        if not sep or not arch or not path:
            raise ConfigError(f"Cannot read the checkpoint source '{source}'.",
                              hint="Write it as checkpoint:<timm architecture>:<path to .safetensors or .pth>, "
                                   "e.g. checkpoint:resnet50:/data/finetuned.safetensors.")
    else:
        arch, path = opts.get("architecture", ""), str(opts["checkpoint"])
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"Checkpoint file not found: {file}", hint="Check the path.")
    if file.suffix.lower() not in _CHECKPOINT_SUFFIXES:
        raise ConfigError(f"Unsupported checkpoint format '{file.suffix}'.",
                          hint="Use a .safetensors file (preferred) or a .pth/.pt state dict.")
    if not timm.is_model(arch):
        raise ConfigError(f"'{arch}' is not a timm architecture.",
                          hint="Give the architecture the weights were trained with, e.g. resnet50 or "
                               "vit_base_patch16_224 (see timm.list_models()).")
    names = _explicit_class_names(opts)
    if names is None:
        raise ConfigError("A user checkpoint needs its class names.",
                          hint="Give a class-name file (one name per line, in output order) with --classes / "
                               "options['class_file'], or a vocabulary such as imagenet-1k.")
    try:
        state_dict = load_state_dict(str(file), use_ema=True, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling refusals, corrupt files
        raise ModelError(f"Cannot read the checkpoint {file.name}.",
                         hint="Save the weights as .safetensors, or as torch.save(model.state_dict()) — files "
                              "that hold whole pickled Python objects are refused for safety.",
                         detail=repr(exc)) from exc
    with _timm_errors(arch):
        model = timm.create_model(arch, pretrained=False, num_classes=len(names), **(opts.get("model_args") or {}))
    head_key = f"{model.pretrained_cfg.get('classifier') or 'head'}.weight"
    if head_key in state_dict and state_dict[head_key].shape[0] != len(names):
        raise ModelError(f"The checkpoint's classifier head has {state_dict[head_key].shape[0]} outputs, but "
                         f"{len(names)} class names were given.",
                         hint="The class-name file must list exactly one name per output of the model, in "
                              "output order.")
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        raise ModelError(f"The checkpoint {file.name} does not fit the timm architecture '{arch}'.",
                         hint="Check the architecture name (and model_args such as img_size) the weights were "
                              "trained with.", detail=str(exc)[:4000]) from exc
    return model, names, weights_revision(file), str(file)


def _explicit_class_names(opts: Mapping[str, Any]) -> list[str] | None:
    if opts.get("class_file"):
        return read_class_file(opts["class_file"])
    if opts.get("class_names"):
        return [str(n) for n in opts["class_names"]]
    if opts.get("vocabulary"):
        return list(load_vocabulary(opts["vocabulary"]).names)
    return None


def _class_names_for(model: Any, opts: Mapping[str, Any]) -> list[str]:
    """Explicit names, else the checkpoint's label_names, else the ImageNet subset its size implies."""
    import timm.data

    names = _explicit_class_names(opts)
    if names is not None:
        if len(names) != model.num_classes:
            raise ModelError(f"The model has {model.num_classes} outputs but {len(names)} class names were given.",
                             hint="Give exactly one class name per model output, in output order.")
        return names
    labels = model.pretrained_cfg.get("label_names")
    if isinstance(labels, dict):
        labels = [labels[k] for k in sorted(labels, key=int)]
    if labels and len(labels) == model.num_classes:
        return _readable(list(map(str, labels)))
    subset = timm.data.infer_imagenet_subset(model)
    if subset == "imagenet-1k":
        return list(load_vocabulary("imagenet-1k").names)
    if subset:
        return [d.split(", ")[0] for d in timm.data.ImageNetInfo(subset).label_descriptions()]
    log.warning("No class names for %s; using 'class <i>'", model.pretrained_cfg.get("architecture"))
    return [f"class {i}" for i in range(model.num_classes)]


def _readable(labels: list[str]) -> list[str]:
    """WordNet ids -> first lemma ('n01440764' -> 'tench'); other labels unchanged."""
    if not all(_WNID_RE.match(x) for x in labels):
        return labels
    import timm.data

    vocab = load_vocabulary("imagenet-1k")
    by_wnid = dict(zip(vocab.wnids, vocab.names))
    info = None
    out = []
    for wnid in labels:
        if wnid in by_wnid:
            out.append(by_wnid[wnid])
            continue
        info = info or timm.data.ImageNetInfo("imagenet-22k")  # WordNet lemmas of all 21k synsets
        try:
            out.append(info.label_name_to_description(wnid).split(", ")[0])
        except (KeyError, ValueError):
            out.append(wnid)
    return out


@contextmanager
def _timm_errors(what: str):
    """timm's RuntimeError/ValueError/OSError while building a model -> ModelError with a hint."""
    try:
        yield
    except (ModelError, ConfigError):
        raise
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise ModelError(f"timm could not build '{what}'.", hint="Check the model name or folder; run with -v for "
                         "the technical detail.", detail=repr(exc)) from exc
