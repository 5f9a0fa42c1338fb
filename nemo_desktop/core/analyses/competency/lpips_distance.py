"""LPIPS through the maintained `lpips` package (Zhang et al.), the distance the seed uses for IGD and for
its perceptual-loss metric.

The package ships only its linear heads; the AlexNet/VGG/SqueezeNet trunk is torchvision's checkpoint in the
torch hub cache. It is a managed asset: when it is not there, LPIPS is *unavailable* (callers report that,
never a 0) unless the caller allows the download.
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from ...errors import NemoError

TRUNK_FILES = {"alex": "alexnet-owt-7be5be79.pth", "vgg": "vgg16-397923af.pth",
               "squeeze": "squeezenet1_1-b8a52dc0.pth"}


class MetricUnavailable(NemoError):
    """A metric's weights are missing; the metric is reported as unavailable."""


def trunk_path(net: str = "alex") -> Path:
    return Path(torch.hub.get_dir()) / "checkpoints" / TRUNK_FILES[net]


class LpipsDistance:
    """d(x, y) per image for (N, 3, H, W) tensors in [0, 1]; differentiable. Images smaller than `min_side`
    are upsampled (bilinear) first, since AlexNet-LPIPS fails on tiny inputs."""

    def __init__(self, model: torch.nn.Module, net: str = "alex", min_side: int = 64) -> None:
        self.model = model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.net, self.min_side = net, int(min_side)

    @property
    def name(self) -> str:
        return f"lpips-{self.net}"

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if y.shape[-2:] != x.shape[-2:]:
            y = F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)
        side = min(x.shape[-2:])
        if side < self.min_side:
            size = tuple(int(round(s * self.min_side / side)) for s in x.shape[-2:])
            x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
            y = F.interpolate(y, size=size, mode="bilinear", align_corners=False)
        if next(self.model.parameters()).device != x.device:
            self.model.to(x.device)
        return self.model(2 * x - 1, 2 * y - 1).flatten()


def load_lpips(net: str = "alex", *, min_side: int = 64, allow_download: bool = False) -> LpipsDistance:
    """The real LPIPS model; MetricUnavailable if its trunk weights are not cached and downloads are off."""
    import lpips

    if net not in TRUNK_FILES:
        raise ValueError(f"unknown LPIPS network {net!r}")
    if not allow_download and not trunk_path(net).is_file():
        raise MetricUnavailable(f"LPIPS ({net}) is unavailable: its backbone weights are not in {trunk_path(net)}.",
                                hint="Download them from the model manager (or `nemo doctor`), then re-run.")
    return LpipsDistance(lpips.LPIPS(net=net, pretrained=True, verbose=False), net, min_side)
