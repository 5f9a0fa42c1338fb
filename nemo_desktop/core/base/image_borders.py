"""Borders that a dataset's files carry and that are cropped whenever those files are loaded.

ObjectNet's images carry a thin red border, which the standard loaders crop away before any transform, 2
pixels per side, `img.crop((2, 2, width - 2, height - 2))`: the ObjectNet toolkit's PyTorch data loader
("crop out red border") and, from it, mlfoundations' wise-ft and model-soups `datasets/objectnet.py`. A
dataset registers its root here (`register_border_crop`) and `images.load_image` crops every file under it,
so the classifier (reference index, query, re-classification), the MLLM and the editor all see the same
cropped image.

Registration is process-wide and idempotent: the files under a root always carry the border, whoever loads
them. Cache keys stay right without knowing about it: images are keyed by the hash of their (cropped)
pixels, and reference indexes are keyed by a manifest that records the crop.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from PIL import Image

_ROOTS: dict[Path, int] = {}
_LOCK = threading.Lock()


def register_border_crop(root: str | os.PathLike, pixels: int) -> None:
    """Crop `pixels` from every side of every image loaded from under `root` (0 removes the rule)."""
    if pixels < 0:
        raise ValueError("pixels must be >= 0")
    key = Path(root).resolve()
    with _LOCK:
        if pixels:
            _ROOTS[key] = int(pixels)
        else:
            _ROOTS.pop(key, None)


def border_for(path: str | os.PathLike) -> int:
    """Pixels to crop from each side of the file at `path` (0 when no registered root holds it)."""
    if not _ROOTS:  # the common case: nothing registered, no filesystem call
        return 0
    p = Path(path).resolve()
    with _LOCK:
        roots = list(_ROOTS.items())
    for root, pixels in roots:
        if p == root or root in p.parents:
            return pixels
    return 0


def crop_border(img: Image.Image, pixels: int, *, scale: float = 1.0) -> Image.Image:
    """`img` without `pixels` (times `scale`, for an image decoded at reduced size; at least 1) per side;
    images too small to keep anything are returned unchanged."""
    if pixels <= 0:
        return img
    px = max(1, round(pixels * scale))
    w, h = img.size
    if w <= 2 * px or h <= 2 * px:
        return img
    return img.crop((px, px, w - px, h - px))
