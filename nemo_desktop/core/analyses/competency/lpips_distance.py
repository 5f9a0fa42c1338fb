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

from ...base.errors import NemoError

TRUNK_FILES = {"alex": "alexnet-owt-7be5be79.pth", "vgg": "vgg16-397923af.pth",
               "squeeze": "squeezenet1_1-b8a52dc0.pth"}
# torchvision's published location of each file (the same URLs its weight enums hold)
TRUNK_BASE_URL = "https://download.pytorch.org/models/"
DOWNLOAD_HINT = "Download them with `nemo competency lpips --download` (AlexNet: 233 MB), then re-run."


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
    """The real LPIPS model; MetricUnavailable if the 'competency' extra (lpips) is not installed, or its trunk
    weights are not cached and downloads are off."""
    from ...base.extras import available, install_hint

    if not available("competency"):
        raise MetricUnavailable("LPIPS is unavailable: the 'competency' extra is not installed.",
                                hint=install_hint("competency"))
    import lpips

    if net not in TRUNK_FILES:
        raise ValueError(f"unknown LPIPS network {net!r}")
    if not allow_download and not trunk_path(net).is_file():
        raise MetricUnavailable(f"LPIPS ({net}) is unavailable: its backbone weights are not in {trunk_path(net)}.",
                                hint=DOWNLOAD_HINT)
    return LpipsDistance(lpips.LPIPS(net=net, pretrained=True, verbose=False), net, min_side)


def trunk_status(net: str = "alex") -> dict:
    """Whether LPIPS can run offline: the trunk file's path and presence (for `nemo doctor` and the app)."""
    path = trunk_path(net)
    return {"metric": f"lpips-{net}", "path": str(path), "present": path.is_file(),
            "size_bytes": path.stat().st_size if path.is_file() else None}


def download_trunk(net: str = "alex", *, url: str | None = None, progress: bool = True) -> Path:
    """Fetch the trunk into the torch hub cache with torch's own downloader, which checks the sha256 prefix
    in the file name (a corrupt or substituted download is refused and leaves nothing behind)."""
    name = TRUNK_FILES[net]
    dst = trunk_path(net)
    if dst.is_file():
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    hash_prefix = name.rsplit("-", 1)[1].split(".")[0]
    try:
        torch.hub.download_url_to_file(url or TRUNK_BASE_URL + name, str(dst), hash_prefix=hash_prefix,
                                       progress=progress)
    except RuntimeError as exc:  # torch raises RuntimeError on a hash mismatch
        dst.unlink(missing_ok=True)
        raise MetricUnavailable(f"The LPIPS ({net}) weights downloaded do not match their checksum: {exc}",
                                hint="Try again; if it persists, the download is being altered.") from None
    except OSError as exc:
        dst.unlink(missing_ok=True)
        raise MetricUnavailable(f"The LPIPS ({net}) weights could not be downloaded: {exc}",
                                hint="Check the network connection (or copy the file to " + str(dst) + ").") from None
    return dst
