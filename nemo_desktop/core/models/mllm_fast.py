"""Fast paths of a local transformers MLLM, chosen at load time (options of the transformers-mllm family).

* quantize "int8" / "int4": torchao weight-only quantisation of the language model's linear layers (the
  vision tower stays in the load dtype: it runs once per image and is small). torchao is the maintained
  PyTorch library for it, installs without changing torch, and is an optional extra ("quantize"). int4 needs
  CUDA kernels; on the CPU it is refused in words.
* static_cache: generate() with a preallocated KV cache (transformers' cache_implementation="static"), the fixed
  shapes torch.compile needs; it also avoids re-allocating the cache every step.
* compile: torch.compile of the model's forward (mode "reduce-overhead" on CUDA, "default" elsewhere), done once
  per loaded model, so the compiled graph is kept across samples in the model process; implies static_cache.

The vision tower runs once per image in each generate() call (the prompt is encoded once and its KV cache
reused for every generated token), so a sample's M hypothesis draws, sent as one batch of the same prompt,
share one prefill shape; see models/requests.py.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

from ..base.errors import ConfigError
from ..base.extras import require

log = logging.getLogger(__name__)

QUANTIZE = ("int8", "int4")


@dataclass(frozen=True)
class FastOptions:
    quantize: str | None = None
    static_cache: bool = False
    compile: bool = False

    def tags(self) -> list[str]:
        return [t for t in (self.quantize, "static" if self.static_cache else None,
                            "compiled" if self.compile else None) if t]

    def model_id(self, base: str) -> str:
        """The model's id in result keys: a fast path that can change the logits makes it another model."""
        tags = self.tags()
        return f"{base}[{','.join(tags)}]" if tags else base

    def record(self) -> dict[str, Any]:
        return {"quantize": self.quantize, "static_cache": self.static_cache, "compile": self.compile}


def fast_options(opts: Mapping[str, Any]) -> FastOptions:
    quantize = opts.get("quantize") or None
    if quantize is not None and quantize not in QUANTIZE:
        raise ConfigError(f"Unknown quantize option '{quantize}'.", hint=f"Use one of: {', '.join(QUANTIZE)}.")
    compiled = bool(opts.get("compile", False))
    return FastOptions(quantize, bool(opts.get("static_cache", False)) or compiled, compiled)


def apply_fast_paths(model: Any, fast: FastOptions, device: str) -> None:
    """Quantise and/or compile a loaded model in place."""
    if fast.quantize:
        quantize_language_model(model, fast.quantize, device)
    if fast.compile:
        import torch

        mode = "reduce-overhead" if str(device).startswith("cuda") else "default"
        model.forward = torch.compile(model.forward, mode=mode, fullgraph=False)
        log.info("torch.compile (%s) of %s: compiled at the first generate()", mode, type(model).__name__)


def quantize_language_model(model: Any, kind: str, device: str) -> None:
    require("quantize", f"{kind} weights for the multimodal LLM")
    if kind == "int4" and not str(device).startswith("cuda"):
        raise ConfigError("int4 weights need a CUDA GPU (torchao's int4 kernels do not run on the CPU).",
                          hint="Use quantize int8 on the CPU, or no quantisation.")
    from torchao.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_

    target = language_model(model)
    config = Int8WeightOnlyConfig() if kind == "int8" else Int4WeightOnlyConfig(group_size=128)
    try:
        quantize_(target, config)
    except ImportError as exc:  # a kernel package torchao needs for this format is missing
        raise ConfigError(f"{kind} weights are not available here: {exc}.",
                          hint="Use int8, or install the kernels torchao names.") from exc


def language_model(model: Any) -> Any:
    """The decoder of a Qwen-VL style model (model.model.language_model), else the whole model."""
    inner = getattr(model, "model", None)
    return getattr(inner, "language_model", None) or model
