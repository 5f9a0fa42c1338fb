"""Local text-only LLMs through transformers (AutoModelForCausalLM + the tokenizer's chat template): the seed's
explainers and evaluators are text-only (Llama 3.1 8B Instruct, Phi-4), and model differences need no image.

    ModelSpec(kind="mllm", family="transformers-llm", source="microsoft/phi-4")

They serve the same `chat` / `chat_batch` protocol as the multimodal LLMs (role "mllm"), so any analysis that only
sends text can use them; a message with an image is refused with a clear error. Generation (greedy or seeded
sampling, the checkpoint's generation config with every sampling field overridden, left padding, OOM guard) is
the multimodal adapter's own code path. Options: max_new_tokens, batch_size, attn_implementation. Remote code
stays off unless the user turns it on.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

from ...base.errors import ConfigError, ModelError, NemoError
from ..batching import oom_guard
from ...base.device import resolve_device, resolve_dtype
from ..protocols import ChatMessage, ModelInfo
from ..families import LoadOptions, ModelSpec, register_family
from .spec_checks import check_options
from .transformers_mllm import TransformersMLLM, _load_error, _locate

log = logging.getLogger(__name__)

FAMILY = "transformers-llm"
OPTIONS = ("max_new_tokens", "batch_size", "attn_implementation")


class _TokenizerAsProcessor:
    """The two things the shared generation code asks of a processor: its tokenizer and batch_decode."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def batch_decode(self, ids, **kw):
        return self.tokenizer.batch_decode(ids, **kw)


class TransformersLLM(TransformersMLLM):
    """A text-only chat model behind the MultimodalLLM protocol (text parts only)."""

    def __init__(self, model: Any, tokenizer: Any, info: ModelInfo, *, max_new_tokens: int = 512,
                 batch_size: int = 4) -> None:
        self.model, self.processor, self.info = model, _TokenizerAsProcessor(tokenizer), info
        self.default_max_new_tokens, self.max_image_side = int(max_new_tokens), None
        self.batch_size = max(1, int(batch_size))
        self.static_cache = False  # the parent's fast-path option (issue 40); a text LLM loads without it
        self.image_token_id = -1  # never matches: usage reports 0 image tokens
        self.last_usage = {}
        tokenizer.padding_side = "left"  # generation continues every row from its last token

    def image_tokens(self, image) -> int:
        raise ConfigError(f"{self.info.model_id} is a text-only LLM; it cannot read images.")

    def _hf_conversation(self, messages: Sequence[ChatMessage]) -> list[dict]:
        out = []
        for msg in messages:
            texts = []
            for part in msg.content:
                if not isinstance(part, str):
                    raise ConfigError(f"{self.info.model_id} is a text-only LLM; it cannot read images.",
                                      hint="Choose a multimodal LLM (e.g. qwen2.5-vl-7b) for this analysis.")
                texts.append(part)
            out.append({"role": msg.role, "content": "\n".join(texts)})
        return out

    def _encode(self, conversations: Sequence[Sequence[ChatMessage]]):
        if self.model is None:
            raise ModelError("This LLM was unloaded.", hint="Load it again before using it.")
        enc = self.processor.tokenizer.apply_chat_template(
            [self._hf_conversation(c) for c in conversations], add_generation_prompt=True, tokenize=True,
            return_dict=True, return_tensors="pt", padding=True)
        return enc.to(self.model.device)


@register_family("mllm", FAMILY)
def load_transformers_llm(spec: ModelSpec, options: LoadOptions) -> TransformersLLM:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    opts = dict(spec.options)
    check_options(opts, OPTIONS, FAMILY)
    device = resolve_device(options.device)
    dtype = resolve_dtype(options.dtype, device)
    where, revision, load_kw = _locate(spec, options)
    load_kw["trust_remote_code"] = options.trust_remote_code
    model_kw = {"attn_implementation": opts["attn_implementation"]} if opts.get("attn_implementation") else {}
    offload = options.cpu_offload and device.startswith("cuda")
    try:
        with oom_guard(f"Loading {spec.source}"):
            tokenizer = AutoTokenizer.from_pretrained(where, **load_kw)
            model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, device_map="auto" if offload else device,
                                                         **load_kw, **model_kw)
    except NemoError:
        raise
    except Exception as exc:
        err = _load_error(exc, spec.source, bool(load_kw.get("local_files_only")))
        if type(err) is ModelError and err.message.startswith("Could not load the multimodal LLM"):
            err = ModelError(f"Could not load the LLM '{spec.source}'.", hint="Check that the folder or repository "
                             "holds a complete causal language model and tokenizer.", detail=err.detail)
        raise err from exc
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"'{spec.source}' has no chat template.",
                          hint="Use an instruction-tuned (chat) model; base models do not follow the prompts.")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # batching needs a pad token; left padding keeps replies intact
    model.eval()
    info = ModelInfo(model_id=spec.model_id, family=FAMILY, revision=revision,
                     extra={"architecture": type(model).__name__, "dtype": str(dtype).replace("torch.", ""),
                            "device": str(model.device), "text_only": True})
    log.info("Loaded %s (%s, %s on %s)", spec.model_id, info.extra["architecture"], info.extra["dtype"],
             info.extra["device"])
    return TransformersLLM(model, tokenizer, info, max_new_tokens=opts.get("max_new_tokens") or 512,
                           batch_size=opts.get("batch_size") or 4)
