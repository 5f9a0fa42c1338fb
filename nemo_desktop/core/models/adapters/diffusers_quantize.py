"""Editor option `quantize`: torchao weight-only quantisation of a diffusers pipeline's large components.

* "int8": torchao's Int8WeightOnlyConfig (int8 weights, one scale per output row; activations stay in the load
  dtype). Runs on the CPU and on CUDA.
* "float8": torchao's Float8WeightOnlyConfig (float8 e4m3 weights). Needs CUDA; on the CPU it is refused in words.

What is quantised: the denoiser (`transformer`, FLUX.1 Kontext's 12B DiT) and, where present, a T5 text encoder
(FLUX's `text_encoder_2`, T5-XXL, 4.8B). These two hold about 99% of FLUX.1 Kontext's parameters; CLIP and the
VAE are small and stay in the load dtype. The weights are quantised on the host before the pipeline is placed
on its device or offloaded, so the full bf16 denoiser never has to fit the GPU (the "24 GB" profile).

Weight-only quantisation changes the edits (slightly), so the option is part of the editor's model id
(`flux-kontext-dev[int8]`) and its results get their own keys, as the MLLM's `quantize` does (mllm_fast.py).
torchao is the maintained PyTorch library for this and the optional extra "quantize".
"""
from __future__ import annotations

import logging
from typing import Any

from ...base.errors import ConfigError
from ...base.extras import require

log = logging.getLogger(__name__)

QUANTIZE = ("int8", "float8")


def quantize_choice(options: dict) -> str | None:
    """The spec's `quantize` option, checked (None when unset)."""
    kind = options.get("quantize") or None
    if kind is not None and kind not in QUANTIZE:
        raise ConfigError(f"Unknown quantize option '{kind}' for an image editor.",
                          hint=f"Use one of: {', '.join(QUANTIZE)}, or leave it unset for the load dtype.")
    return kind


def quantized_model_id(model_id: str, kind: str | None) -> str:
    """The editor's id in result keys: quantised weights make it another model."""
    return f"{model_id}[{kind}]" if kind else model_id


def check_device(kind: str | None, device: str) -> None:
    """Refuse, before any weights are read, a quantisation the device cannot run."""
    if kind == "float8" and not str(device).startswith("cuda"):
        raise ConfigError("float8 editor weights need a CUDA GPU (torchao's float8 kernels do not run on the CPU).",
                          hint="Use quantize int8 on the CPU, or no quantisation.")


def quantizable_components(pipe: Any) -> dict[str, Any]:
    """The pipeline's denoiser transformer and T5 text encoders, by component name."""
    out = {}
    for name, component in getattr(pipe, "components", {}).items():
        cls = type(component).__name__
        if name == "transformer" and component is not None:
            out[name] = component
        elif cls.startswith("T5") and cls.endswith("EncoderModel"):
            out[name] = component
    return out


def quantize_pipeline(pipe: Any, kind: str, model_id: str) -> list[str]:
    """Quantise `pipe`'s transformer and T5 encoder in place; returns the component names quantised."""
    require("quantize", f"{kind} weights for the image editor")
    from torchao.quantization import Float8WeightOnlyConfig, Int8WeightOnlyConfig, quantize_

    targets = quantizable_components(pipe)
    if not targets:
        raise ConfigError(f"{model_id} has no transformer or T5 text encoder to quantise.",
                          hint="The quantize option is for DiT editors such as FLUX.1 Kontext; leave it unset.")
    config = Int8WeightOnlyConfig() if kind == "int8" else Float8WeightOnlyConfig()
    for name, component in targets.items():
        try:
            quantize_(component, config)
        except ImportError as exc:  # a kernel package torchao needs for this format is missing
            raise ConfigError(f"{kind} editor weights are not available here: {exc}.",
                              hint="Use int8, or install the kernels torchao names.") from exc
    log.info("Quantised %s of %s to %s weights (torchao)", ", ".join(targets), model_id, kind)
    return list(targets)
