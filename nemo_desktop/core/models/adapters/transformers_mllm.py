"""Local multimodal LLMs through transformers: Qwen2-VL, Qwen2.5-VL, Qwen3-VL (dense and MoE).

    ModelSpec(kind="mllm", family="transformers-mllm", source="Qwen/Qwen2.5-VL-7B-Instruct",
              options={"min_pixels": 256 * 28 * 28, "max_pixels": 1280 * 28 * 28})

`source` is a Hub repo id (`repo@revision` or spec.revision pins it; the commit becomes
ModelInfo.revision) or a local folder saved with `save_pretrained` (model + processor). Options:
min_pixels / max_pixels (the processor's image budget, which sets how many tokens an image costs),
max_new_tokens (default for calls that pass None), max_image_side (larger images are downscaled before
the processor sees them), batch_size (conversations per generate() call in chat_batch),
attn_implementation (transformers' default is "sdpa", PyTorch's fused attention; the one used is recorded). All three
Qwen generations share this code path: AutoProcessor's chat template places the images,
AutoModelForImageTextToText generates.

Fast paths (models/mllm_fast.py): quantize ("int8" / "int4": torchao weight-only quantisation of the language
model; int4 needs a CUDA GPU), static_cache (a preallocated KV cache, transformers' cache_implementation
"static", which torch.compile needs for fixed shapes) and compile (torch.compile of the decoder's forward,
compiled once per loaded model and kept for every later sample). Each can change the last digits of the
logits, so each is part of the model's id in result keys ("qwen2.5-vl-7b[int8,static]").
"""
from __future__ import annotations

import copy
import hashlib
import logging
import os
from pathlib import Path
from typing import Any, Sequence

from PIL import Image

from ...base.errors import ConfigError, ModelError, NemoError, WeightsNotFoundError
from ...base.images import downscale, to_rgb
from ..batching import oom_guard
from ...base.device import free_memory, resolve_device, resolve_dtype
from ..hub_files import cache_dir_for, commit_from_path, fetch_file, offline_requested
from ..protocols import ChatMessage, ChatRequest, ModelInfo, Reply
from ..row_sampling import RowSampler
from ..families import LoadOptions, ModelSpec, register_family
from ..requests import ChatBatchFromRequests
from ..mllm_fast import apply_fast_paths, fast_options
from .spec_checks import check_options
from ..sampling import Sampling, resolve_sampling

log = logging.getLogger(__name__)

FAMILY = "transformers-mllm"
OPTIONS = ("min_pixels", "max_pixels", "max_new_tokens", "max_image_side", "batch_size", "attn_implementation",
           "quantize", "static_cache", "compile")
_WEIGHT_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".jinja", ".txt")
# Sampling fields of a greedy call: transformers' defaults (unused without do_sample; None would be refilled
# from the checkpoint, and a checkpoint's top_k=1 then draws a "flag only used in sampling" warning).
_GREEDY_NEUTRAL = {"temperature": 1.0, "top_p": 1.0, "top_k": 50}


class TransformersMLLM(ChatBatchFromRequests):
    """MultimodalLLM over a loaded transformers model + processor. Not thread-safe (one GPU worker)."""

    def __init__(self, model: Any, processor: Any, info: ModelInfo, *, max_new_tokens: int = 512,
                 max_image_side: int | None = 2048, batch_size: int = 4, static_cache: bool = False):
        self.model = model
        self.processor = processor
        self.info = info
        self.default_max_new_tokens = int(max_new_tokens)
        self.max_image_side = max_image_side
        self.batch_size = max(1, int(batch_size))
        self.static_cache = bool(static_cache)
        self.image_token_id = getattr(model.config, "image_token_id", None)
        self.last_usage: dict[str, list[int]] = {}
        processor.tokenizer.padding_side = "left"  # generation continues every row from its last token

    # -- MultimodalLLM ---------------------------------------------------------------------------------

    def chat(self, messages: Sequence[ChatMessage], *, max_new_tokens: int | None = None,
             temperature: float = 0.0, seed: int | None = None, top_p: float | None = None,
             top_k: int | None = None, min_p: float | None = None) -> str:
        return self.chat_batch([messages], max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                               top_p=top_p, top_k=top_k, min_p=min_p)[0]

    def chat_requests(self, requests: Sequence[ChatRequest]) -> list[str]:
        """Each request with its own settings, `batch_size` conversations per generate() call. Requests with
        the same token limit share a call; a sampled row draws from its own seeded generator (RowSampler),
        so its reply is the one it gets alone, whatever else is in the batch."""
        replies: list[Any] = [None] * len(requests)
        usage: dict[str, list[int]] = {"prompt_tokens": [], "image_tokens": [], "completion_tokens": []}
        by_limit: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            by_limit.setdefault(int(r.max_new_tokens or self.default_max_new_tokens), []).append(i)
        for limit, indices in by_limit.items():
            for start in range(0, len(indices), self.batch_size):
                chunk = indices[start:start + self.batch_size]
                rows = [_row(requests[i]) for i in chunk]
                texts, chunk_usage = self._generate([requests[i].messages for i in chunk], limit, rows)
                for i, text in zip(chunk, texts):
                    replies[i] = text
                for k, v in chunk_usage.items():
                    usage[k].extend(v)
        self.last_usage = usage
        return replies

    # -- extras ----------------------------------------------------------------------------------------

    def image_tokens(self, image) -> int:
        """How many tokens this image costs in a prompt with the current pixel budget."""
        inputs = self._encode([[ChatMessage.user(image)]])
        return int((inputs["input_ids"] == self.image_token_id).sum())

    def unload(self) -> None:
        """Drop the weights and give the GPU memory back; the object is unusable afterwards."""
        self.model = None
        free_memory()

    # -- internals -------------------------------------------------------------------------------------

    def _hf_conversation(self, messages: Sequence[ChatMessage]) -> list[dict]:
        out = []
        for msg in messages:
            parts = []
            for part in msg.content:
                if isinstance(part, str):
                    parts.append({"type": "text", "text": part})
                elif isinstance(part, Image.Image):
                    img = to_rgb(part)
                    parts.append({"type": "image", "image": downscale(img, self.max_image_side)
                                  if self.max_image_side else img})
                else:
                    raise TypeError(f"chat content must be str or PIL images, not {type(part).__name__}")
            out.append({"role": msg.role, "content": parts})
        return out

    def _encode(self, conversations: Sequence[Sequence[ChatMessage]]):
        if self.model is None:
            raise ModelError("This multimodal LLM was unloaded.", hint="Load it again before using it.")
        # sanitize_control_tokens: text such as "<|im_end|>" inside a caption stays text, it cannot end a turn.
        inputs = self.processor.apply_chat_template(
            [self._hf_conversation(c) for c in conversations], add_generation_prompt=True, tokenize=True,
            return_dict=True, return_tensors="pt", processor_kwargs={"padding": True},
            sanitize_control_tokens=True)
        return inputs.to(device=self.model.device, dtype=self.model.dtype)

    def _generation_config(self, max_new_tokens: int, sampling: Sampling | None):
        """The checkpoint's generation config with every sampling field overridden. `generate` refills any
        field left None from the checkpoint (transformers 5), so "off" is written as a neutral value, never
        None: otherwise Qwen2.5-VL's top_k=1 / top_p=0.001 would make every sampled draw greedy.
        Non-sampling fields of the checkpoint (repetition_penalty, eos ids) stay in force for every draw."""
        cfg = copy.deepcopy(self.model.generation_config)
        cfg.max_new_tokens = max_new_tokens
        if sampling is not None:
            cfg.do_sample, cfg.temperature = True, sampling.temperature
            cfg.top_p, cfg.top_k, cfg.min_p = sampling.top_p, sampling.top_k, sampling.min_p
        else:  # greedy: transformers' own defaults, which its validation accepts without do_sample
            cfg.do_sample = False
            for name, value in _GREEDY_NEUTRAL.items():
                setattr(cfg, name, value)
        if cfg.pad_token_id is None:
            cfg.pad_token_id = self.processor.tokenizer.pad_token_id
        if self.static_cache:
            cfg.cache_implementation = "static"
        return cfg

    def _generate(self, conversations, max_new_tokens: int, rows: Sequence[tuple[Sampling, int | None] | None]):
        import torch
        from transformers import LogitsProcessorList

        with oom_guard("The multimodal LLM"):
            inputs = self._encode(conversations)
            # generate() runs greedy; sampled rows are drawn by RowSampler (see models/row_sampling.py)
            cfg = self._generation_config(max_new_tokens, None)
            sampler = RowSampler(rows, self.model.device)
            extra = {"logits_processor": LogitsProcessorList([sampler])} if sampler.samples else {}
            with torch.inference_mode():
                out = self.model.generate(**inputs, generation_config=cfg, **extra)
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = out[:, prompt_len:]
        ends = [_until_eos(row, cfg.eos_token_id) for row in new_tokens.tolist()]
        texts = [Reply(t.strip(), _finish(n, eos, max_new_tokens), n) for t, (n, eos) in
                 zip(self.processor.batch_decode(new_tokens, skip_special_tokens=True), ends)]
        usage = {"prompt_tokens": inputs["attention_mask"].sum(1).tolist(),
                 "image_tokens": (inputs["input_ids"] == self.image_token_id).sum(1).tolist(),
                 "completion_tokens": [n for n, _ in ends]}
        return texts, usage


def _row(request: ChatRequest) -> tuple[Sampling, int | None] | None:
    """A request's row for RowSampler: None for greedy, else its explicit sampling settings and seed."""
    sampling = resolve_sampling(float(request.temperature), request.top_p, request.top_k, request.min_p)
    return None if sampling is None else (sampling, request.seed)


def _until_eos(ids: list[int], eos) -> tuple[int, bool]:
    """(tokens generated, the end-of-sequence token included; whether the row reached one). Rows of a batch
    are padded to the longest, so the count is up to the first end-of-sequence token, not the row's length."""
    eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
    for i, tok in enumerate(ids):
        if tok in eos_ids:
            return i + 1, True
    return len(ids), False


def _finish(tokens: int, reached_eos: bool, max_new_tokens: int) -> str | None:
    """"stop" when the model ended its answer, "length" when it was still writing at max_new_tokens (the
    text is cut short); None when neither (another stopping rule of the checkpoint's generation config)."""
    if reached_eos:
        return "stop"
    return "length" if tokens >= max_new_tokens else None


# -- loading --------------------------------------------------------------------------------------------

def _locate(spec: ModelSpec, options: LoadOptions) -> tuple[str, str | None, dict]:
    """(what to give from_pretrained, revision for ModelInfo, from_pretrained kwargs).

    A repo id is pinned to the commit its cached/downloaded config.json belongs to, so every file comes
    from the same snapshot; hub_files turns gated / missing / offline-cache-miss into clear errors.
    """
    source = spec.source
    if source.startswith("local-dir:"):
        source = source[len("local-dir:"):]
    folder = Path(source).expanduser()
    if folder.is_dir():
        return str(folder), commit_from_path(folder / "config.json") or folder_fingerprint(folder), {}
    if os.path.isabs(source) or source.startswith((".", "~")) or spec.source.startswith("local-dir:"):
        raise WeightsNotFoundError(f"The model folder '{folder}' does not exist.",
                                   hint="Check the path, or give a Hugging Face repository id instead.")
    repo, _, inline_rev = source.partition("@")
    commit = commit_from_path(fetch_file(repo, "config.json", options, revision=spec.revision or inline_rev or None))
    revision = commit or spec.revision or inline_rev or None
    # The same cache as fetch_file above (portable mode, the app folder): config and weights stay together.
    return repo, revision, {"revision": revision, "cache_dir": cache_dir_for(options),
                            "local_files_only": offline_requested(options)}


def folder_fingerprint(folder: Path) -> str:
    """Pins a plain folder without hashing gigabytes: config.json's bytes + every model file's name and size."""
    h = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        if f.is_file() and f.suffix in _WEIGHT_SUFFIXES:
            h.update(f"{f.name}:{f.stat().st_size}\n".encode())
    if (folder / "config.json").is_file():
        h.update((folder / "config.json").read_bytes())
    return "local-" + h.hexdigest()[:16]


def _load_error(exc: BaseException, source: str, offline_hub: bool) -> Exception:
    text = str(exc)
    if offline_hub and isinstance(exc, OSError):  # config.json was cached, a weight shard or processor file is not
        return WeightsNotFoundError(f"Parts of '{source}' are missing from the local Hugging Face cache, and "
                                    f"offline mode forbids downloading them.",
                                    hint="Download the model while online (`nemo models download` or the Model "
                                         "manager), or unset HF_HUB_OFFLINE.", detail=text)
    if "trust_remote_code" in text:
        return ModelError(f"'{source}' needs custom code from its repository to load.",
                          hint="Enable trust_remote_code for this model only if you trust its authors.",
                          detail=text)
    if isinstance(exc, ValueError) and "Unrecognized configuration class" in text:
        return ModelError(f"'{source}' is not an image-text-to-text model that transformers can load.",
                          hint="Choose a multimodal chat model such as Qwen/Qwen2.5-VL-7B-Instruct.", detail=text)
    return ModelError(f"Could not load the multimodal LLM '{source}'.",
                      hint="Check that the folder or repository holds a complete model and processor; a newer "
                           "transformers version may be needed for this model.",
                      detail=f"{type(exc).__name__}: {text}")


def _set_pixel_budget(processor: Any, budget: dict[str, int], source: str) -> None:
    """Qwen-VL image processors resize every image to a pixel count within [shortest_edge, longest_edge]
    (transformers 5 names min/max pixels so in `size`); override either bound, keep the other."""
    ip = getattr(processor, "image_processor", None)
    size = getattr(ip, "size", None)
    if getattr(size, "longest_edge", None) is None or getattr(size, "shortest_edge", None) is None:
        raise ConfigError(f"min_pixels / max_pixels are not supported by the image processor of '{source}'.",
                          hint="Remove these options; they apply to Qwen2-VL, Qwen2.5-VL and Qwen3-VL models.")
    from transformers.image_utils import SizeDict

    lo, hi = budget.get("min_pixels", size.shortest_edge), budget.get("max_pixels", size.longest_edge)
    if lo > hi:
        raise ConfigError(f"min_pixels ({lo}) is larger than max_pixels ({hi}) for '{source}'.",
                          hint="Lower min_pixels or raise max_pixels.")
    ip.size = SizeDict(shortest_edge=lo, longest_edge=hi)


@register_family("mllm", FAMILY)
def load_transformers_mllm(spec: ModelSpec, options: LoadOptions) -> TransformersMLLM:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    opts = dict(spec.options)
    check_options(opts, OPTIONS, FAMILY)
    pixel_budget = {k: int(opts[k]) for k in ("min_pixels", "max_pixels") if opts.get(k) is not None}
    if any(v <= 0 for v in pixel_budget.values()) or \
            pixel_budget.get("min_pixels", 0) > pixel_budget.get("max_pixels", float("inf")):
        raise ConfigError(f"Invalid image pixel budget {pixel_budget}.",
                          hint="min_pixels and max_pixels must be positive, with min_pixels <= max_pixels.")

    device = resolve_device(options.device)
    dtype = resolve_dtype(options.dtype, device)
    where, revision, load_kw = _locate(spec, options)
    load_kw["trust_remote_code"] = options.trust_remote_code
    if opts.get("attn_implementation"):
        load_kw["attn_implementation"] = opts["attn_implementation"]
    fast = fast_options(opts)
    offload = options.cpu_offload and device.startswith("cuda")
    try:
        with oom_guard(f"Loading {spec.source}"):
            processor = AutoProcessor.from_pretrained(where, **{k: v for k, v in load_kw.items()
                                                                if k != "attn_implementation"})
            model = AutoModelForImageTextToText.from_pretrained(
                where, dtype=dtype, device_map="auto" if offload else device, **load_kw)
    except NemoError:
        raise
    except Exception as exc:
        raise _load_error(exc, spec.source, bool(load_kw.get("local_files_only"))) from exc
    model.eval()
    apply_fast_paths(model, fast, device)
    if pixel_budget:
        _set_pixel_budget(processor, pixel_budget, spec.source)
    info = ModelInfo(model_id=fast.model_id(spec.model_id), family=FAMILY, revision=revision,
                     extra={"architecture": type(model).__name__, "dtype": str(dtype).replace("torch.", ""),
                            "device": str(model.device), "attn_implementation": getattr(model.config, "_attn_implementation", None),
                            **fast.record(), **pixel_budget})
    log.info("Loaded %s (%s, %s on %s)", spec.model_id, info.extra["architecture"], info.extra["dtype"],
             info.extra["device"])
    return TransformersMLLM(model, processor, info, max_new_tokens=opts.get("max_new_tokens") or 512,
                            max_image_side=opts.get("max_image_side", 2048),
                            batch_size=opts.get("batch_size") or 4, static_cache=fast.static_cache)
