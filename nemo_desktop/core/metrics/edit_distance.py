"""How far a counterfactual moved from the original image (issue 19, "destructive edits").

CEI only says that an edit raised P(true); an edit that replaces the whole image with colour noise can do that
too. Every image counterfactual therefore carries a distance from its original, on a 0 (identical) .. ~1
(unrelated) scale, measured with:

* **LPIPS** (Zhang et al. 2018, the `lpips` package, AlexNet trunk) when its weights are on disk: the linear
  layers ship inside the `lpips` package, the AlexNet trunk is torchvision's ImageNet checkpoint in the torch
  hub cache (`<torch hub dir>/checkpoints/alexnet-owt-7be5be79.pth`). It is never downloaded from here: a
  measure must not stall a diagnosis on the network.
* otherwise **1 − SSIM** (Wang et al. 2004; Gaussian window sigma 1.5, K1 = 0.01, K2 = 0.03, on luma in
  [0, 1]), computed with scipy's Gaussian filter. scikit-image has the same function but is not a dependency
  of this project, and the formula is a few lines over scipy, which is.

Both scales put pure noise near 1 and a local edit well below 0.5; the name of the measure used is kept with
every value, because the two are not interchangeable numbers.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)

LPIPS = "lpips-alex"
SSIM = "1-ssim"
METRICS = ("auto", LPIPS, SSIM)
ALEXNET_FILE = "alexnet-owt-7be5be79.pth"  # torchvision AlexNet_Weights.IMAGENET1K_V1, the LPIPS trunk
LPIPS_SIDE = 256  # LPIPS runs on both images resized to this side (the network's scale of the paper)

_lock = threading.Lock()
_lpips_model: Any = None


def alexnet_checkpoint() -> Path:
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints" / ALEXNET_FILE


def lpips_available() -> bool:
    """The `lpips` package imports and the AlexNet trunk's weights are on disk (nothing is downloaded)."""
    try:
        import lpips  # noqa: F401

        return alexnet_checkpoint().is_file()
    except Exception:  # noqa: BLE001 - no torch / no lpips: the SSIM fallback is used
        return False


def resolve_metric(metric: str = "auto") -> str:
    """The measure `metric` means here: "auto" is LPIPS when its weights are present, else 1 − SSIM."""
    if metric not in METRICS:
        from ..base.errors import ConfigError

        raise ConfigError(f"Unknown edit distance '{metric}'.", hint=f"Use one of: {', '.join(METRICS)}.")
    if metric == "auto":
        return LPIPS if lpips_available() else SSIM
    return metric


def edit_distance(original: Image.Image, edited: Image.Image, metric: str = "auto") -> tuple[float, str]:
    """(distance, name of the measure) between an image and its counterfactual; 0 = identical."""
    name = resolve_metric(metric)
    if edited.size != original.size:
        edited = edited.resize(original.size, Image.Resampling.LANCZOS)
    if name == LPIPS:
        try:
            return _lpips_distance(original, edited), LPIPS
        except Exception:  # noqa: BLE001 - a broken LPIPS install falls back, and says so by the name
            if metric == LPIPS:
                raise
            log.warning("LPIPS failed; using 1 - SSIM", exc_info=True)
    return ssim_distance(original, edited), SSIM


VERDICT_WORDS = {"global": "whole image changed, structure kept", "destroyed": "picture destroyed or replaced",
                 "no change": "nothing changed", "local": None}


def describe(distance: float | None, metric: str | None, flagged: bool = False, *, structure: float | None = None,
             verdict: str | None = None) -> str:
    """"1-ssim 0.97, structure 0.98, whole image changed, structure kept (flagged)" for tables and the CLI;
    "—" when not measured. Without a verdict (results stored before issue 27) a flag meant "whole image"."""
    if distance is None:
        return "\u2014"
    text = f"{metric or 'distance'} {distance:.2f}"
    if structure is not None:
        text += f", structure {structure:.2f}"
    words = VERDICT_WORDS.get(verdict) if verdict else ("whole image changed" if flagged else None)
    return text + (f", {words}" if words else "") + (" (flagged)" if flagged else "")


# -- 1 - SSIM -------------------------------------------------------------------------------------------------
def _luma(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"), dtype=np.float64) / 255.0


def ssim(a: Image.Image, b: Image.Image, sigma: float = 1.5) -> float:
    """Mean SSIM of two same-size images on luma (Wang et al. 2004, Gaussian-weighted statistics)."""
    from scipy.ndimage import gaussian_filter

    x, y = _luma(a), _luma(b)
    c1, c2 = 0.01 ** 2, 0.03 ** 2

    def blur(z: np.ndarray) -> np.ndarray:
        return gaussian_filter(z, sigma, mode="reflect", truncate=3.5)

    mx, my = blur(x), blur(y)
    vx = blur(x * x) - mx * mx
    vy = blur(y * y) - my * my
    cxy = blur(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(np.mean(s))


def ssim_distance(a: Image.Image, b: Image.Image) -> float:
    """1 − SSIM, clipped to [0, 1] (negative SSIM, anti-correlated structure, counts as 1)."""
    return float(min(1.0, max(0.0, 1.0 - ssim(a, b))))


# -- LPIPS ----------------------------------------------------------------------------------------------------
def _model() -> Any:
    global _lpips_model
    with _lock:
        if _lpips_model is None:
            import warnings

            import lpips

            with warnings.catch_warnings():  # lpips 0.1.4 calls torchvision's deprecated `pretrained=`
                warnings.simplefilter("ignore", UserWarning)
                _lpips_model = lpips.LPIPS(net="alex", verbose=False).eval()
        return _lpips_model


def _tensor(img: Image.Image) -> Any:
    import torch

    img = img.convert("RGB").resize((LPIPS_SIDE, LPIPS_SIDE), Image.Resampling.BICUBIC)
    arr = np.asarray(img, dtype=np.float32) / 127.5 - 1.0  # LPIPS expects [-1, 1]
    return torch.from_numpy(arr).permute(2, 0, 1).unsqueeze(0)


def _lpips_distance(a: Image.Image, b: Image.Image) -> float:
    import torch

    model = _model()
    with torch.inference_mode():
        return float(model(_tensor(a), _tensor(b)).reshape(-1)[0])


def reset_cache() -> None:
    """Forget the loaded LPIPS model (tests that change the torch hub directory)."""
    global _lpips_model
    with _lock:
        _lpips_model = None
