"""GPU fast paths for classifier forward passes, chosen once per loaded model.

* pinned host memory + non-blocking copies: only on CUDA (pinning is wasted work on the CPU);
* channels-last memory format: on CUDA for convolutional networks, whose cuDNN kernels run faster in NHWC;
  transformers (ViT, CLIP towers) gain nothing from it and keep the default layout;
* bf16 autocast: on CUDA GPUs with bf16 support when the weights are float32 and the model's options ask for
  it (`autocast: "bf16"`). Weights loaded with dtype "auto" are already bf16 on such GPUs
  (device.resolve_dtype), so autocast only matters for a user who keeps float32 weights and wants the speed.

`select_fast_paths` is a pure function of the device's facts, so its rules are tested without a GPU.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from ..base.errors import ConfigError

AUTOCAST_CHOICES = ("off", "bf16")


@dataclass(frozen=True)
class FastPaths:
    pin_memory: bool = False
    non_blocking: bool = False
    channels_last: bool = False
    autocast_bf16: bool = False

    def autocast(self, device: str):
        """A bf16 autocast context on CUDA when selected, else a no-op context."""
        if not self.autocast_bf16:
            return nullcontext()
        import torch

        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)


def select_fast_paths(device: str, weight_dtype: str, *, bf16_supported: bool, convolutional: bool,
                      autocast: str = "off") -> FastPaths:
    """The fast paths for a model on `device` with weights of `weight_dtype` ("float32", "bfloat16", ...)."""
    if autocast not in AUTOCAST_CHOICES:
        raise ConfigError(f"Unknown autocast setting '{autocast}'.", hint=f"Use one of: {', '.join(AUTOCAST_CHOICES)}.")
    cuda = str(device).startswith("cuda")
    if not cuda:
        return FastPaths()
    return FastPaths(pin_memory=True, non_blocking=True, channels_last=convolutional,
                     autocast_bf16=autocast == "bf16" and bf16_supported and weight_dtype == "float32")


def fast_paths_for(model: Any, device: str, dtype: Any, *, autocast: str = "off") -> FastPaths:
    """Read the facts from a loaded torch model and its device, then apply `select_fast_paths`."""
    import torch

    cuda = str(device).startswith("cuda")
    convs = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules()) if model is not None else 0
    return select_fast_paths(device, str(dtype).replace("torch.", ""),
                             bf16_supported=cuda and torch.cuda.is_bf16_supported(),
                             # a ViT's patch embedding is one Conv2d; a CNN has many
                             convolutional=convs > 2, autocast=autocast)


def host_to_device(batch, device: str, fast: FastPaths):
    """Move a host tensor to `device` (pinned + non-blocking on CUDA)."""
    if fast.pin_memory and not batch.is_pinned():
        batch = batch.pin_memory()
    return batch.to(device=device, non_blocking=fast.non_blocking)


def to_memory_format(batch, fast: FastPaths):
    if fast.channels_last and batch.ndim == 4:
        import torch

        return batch.contiguous(memory_format=torch.channels_last)
    return batch
