"""Indexing with JPEG decoding and resizing on the GPU (`LoaderSettings.decode = "gpu"`).

On a GPU, PIL decoding on the CPU is what limits indexing (the README's figure: 665 of the classifier's 9,334
images/s). With decode "gpu", loader workers only read and hash each file; the main thread decodes the batch's
JPEGs at once with torchvision's nvJPEG `decode_jpeg(..., device="cuda")`, and resizes and crops them on the
GPU the way the classifier's own eval transform does (timm: shorter side to input / crop_pct, bicubic or
bilinear with antialiasing, centre crop). Files that are not JPEGs (PNG, WebP, ...) are decoded by PIL on the
worker and resized on the GPU with the others.

Agreement: PIL's resampling and torch's antialiased interpolation differ by a grey level here and there, and the
CPU path draft-decodes large JPEGs; the embeddings of the two paths agree to a cosine similarity above
`EMBEDDING_TOLERANCE` (tests/core/data/test_gpu_decode.py measures it, on the CPU, with this module's code run
on CPU tensors). An index records which path built its rows ("decode" in its metadata); both paths may fill one
index, since retrieval ranks by these cosines.

Fallback: decode "gpu" where it cannot run (no CUDA device, a classifier without timm's data config, an
unusual crop mode) uses the CPU pipeline unchanged, and `gpu_decode_plan` says why in a note.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

DECODES = ("cpu", "gpu")
EMBEDDING_TOLERANCE = 0.995  # least cosine similarity between the two paths' embeddings of one image
_JPEG_MAGIC = b"\xff\xd8\xff"


class DevicePreprocess:
    """Decode (JPEG bytes) or take (PIL images), resize, crop: a uint8 (N, 3, H, W) tensor on `device`."""

    def __init__(self, data_config: dict, device: str) -> None:
        from torchvision.transforms import InterpolationMode

        self.device = device
        _, h, w = data_config["input_size"]
        self.crop = (int(h), int(w))
        crop_pct = float(data_config.get("crop_pct") or 1.0)
        self.mode = data_config.get("crop_mode", "center")
        self.scale = (int(math.floor(h / crop_pct)), int(math.floor(w / crop_pct)))
        modes = {"bicubic": InterpolationMode.BICUBIC, "bilinear": InterpolationMode.BILINEAR,
                 "nearest": InterpolationMode.NEAREST}
        self.interpolation = modes[data_config.get("interpolation", "bicubic")]

    def __call__(self, images: Sequence[Any]):
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg
        from torchvision.transforms.v2 import functional as F

        jpegs = [i for i, im in enumerate(images) if isinstance(im, (bytes, bytearray))]
        decoded: dict[int, Any] = {}
        if jpegs:
            data = [torch.frombuffer(bytearray(images[i]), dtype=torch.uint8) for i in jpegs]
            # one batched nvJPEG call; EXIF orientation applied, as the CPU path's load_image does
            outs = decode_jpeg(data, mode=ImageReadMode.RGB, device=self.device, apply_exif_orientation=True)
            decoded.update(zip(jpegs, outs))
        out = []
        for i, im in enumerate(images):
            t = decoded.get(i)
            if t is None:  # decoded by PIL on the worker
                t = F.pil_to_tensor(im.convert("RGB")).to(self.device)
            out.append(self._resize_crop(t, F))
        return torch.stack(out)

    def _resize_crop(self, t, F):
        if self.mode == "squash":
            t = F.resize(t, list(self.scale), interpolation=self.interpolation, antialias=True)
        else:  # "center": the shorter side to the scale size, as timm's Resize(int) does
            side = self.scale[0] if self.scale[0] == self.scale[1] else None
            if side is not None:
                t = F.resize(t, side, interpolation=self.interpolation, antialias=True)
            else:
                t = F.resize(t, list(self.scale), interpolation=self.interpolation, antialias=True)
        return F.center_crop(t, list(self.crop))


def gpu_decode_plan(classifier: Any, decode: str) -> tuple[DevicePreprocess | None, str | None]:
    """(the device preprocessing, None) when decode "gpu" can run for `classifier`, else (None, why not: a note
    for the user; the CPU pipeline runs unchanged). decode "cpu": (None, None)."""
    from ..base.errors import ConfigError

    if decode not in DECODES:
        raise ConfigError(f"Unknown decode path '{decode}'.", hint=f"Use one of: {', '.join(DECODES)}.")
    if decode == "cpu":
        return None, None
    device = str(getattr(classifier, "device", "cpu"))
    if not device.startswith("cuda"):
        return None, ("GPU JPEG decoding needs the classifier on a CUDA device; this one runs on "
                      f"{device}, so images are decoded on the CPU as usual.")
    return device_plan(classifier, device)


def device_plan(classifier: Any, device: str) -> tuple[DevicePreprocess | None, str | None]:
    """The device preprocessing for `classifier` on `device` (tests run it with device "cpu")."""
    config = getattr(classifier, "data_config", None)
    if not isinstance(config, dict) or not callable(getattr(classifier, "outputs_from_pixels", None)):
        return None, ("GPU JPEG decoding needs a classifier that states its preprocessing (timm models do); "
                      "images are decoded on the CPU as usual.")
    if config.get("crop_mode", "center") not in ("center", "squash") or \
            config.get("interpolation", "bicubic") not in ("bicubic", "bilinear", "nearest"):
        return None, (f"GPU JPEG decoding does not reproduce crop mode '{config.get('crop_mode')}' / "
                      f"interpolation '{config.get('interpolation')}'; images are decoded on the CPU as usual.")
    return DevicePreprocess(config, device), None


def read_for_device(path: Path) -> Any:
    """On a loader worker: a JPEG's bytes (decoded later on the device, in a batch), any other image decoded
    by PIL. Unreadable files raise, as the CPU path's decoding does."""
    from ..base.images import load_image, unreadable_reason

    why = unreadable_reason(path)
    if why is not None:
        from ..base.errors import InputImageError

        raise InputImageError(f"{path} cannot be read: {why}.")
    with open(path, "rb") as f:
        head = f.read(3)
        if head == _JPEG_MAGIC:
            return head + f.read()
    return load_image(path)
