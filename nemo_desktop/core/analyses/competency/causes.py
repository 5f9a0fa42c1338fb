"""The seed's six causes of low competency as image modifications, and the automated factor search.

Brightness, contrast and saturation use PIL's ImageEnhance (Brightness, Contrast, Color) with factor f;
noise adds uniform(-f, f) per channel on the 0-255 scale and clips; pixelation resizes to (w//f, h//f)
with NEAREST and back. "Spatial" (unfamiliar content) is not a modification: it is the images of an unseen
class or with pasted objects, selected by competency. The search takes, per image, the first listed factor
whose result scores below the threshold (the reference's automated variant).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from PIL import Image, ImageEnhance

CAUSES = ("spatial", "brightness", "contrast", "saturation", "noise", "pixelation")

# Factor lists tried in order (the reference's lists for its speed dataset, extended to both directions).
DEFAULT_FACTORS: dict[str, tuple[float, ...]] = {
    "brightness": (0.25, 0.5, 2.0, 3.0, 4.0, 5.0),
    "contrast": (0.25, 0.5, 2.0, 3.0, 4.0, 5.0),
    "saturation": (0.0, 0.25, 2.0, 3.0, 4.0, 5.0),
    "noise": (25, 50, 75, 100, 150, 200),
    "pixelation": (2, 3, 4, 6, 8),
}


def modify(image: Image.Image, cause: str, factor: float, *, seed: int = 0) -> Image.Image:
    img = image.convert("RGB")
    if cause == "brightness":
        return ImageEnhance.Brightness(img).enhance(factor)
    if cause == "contrast":
        return ImageEnhance.Contrast(img).enhance(factor)
    if cause == "saturation":
        return ImageEnhance.Color(img).enhance(factor)
    if cause == "noise":
        a = np.asarray(img, np.float64)
        a = a + np.random.default_rng(seed).uniform(-factor, factor, a.shape)
        return Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8), "RGB")
    if cause == "pixelation":
        f = int(factor)
        if f <= 1:
            return img.copy()
        small = img.resize((max(1, img.width // f), max(1, img.height // f)), Image.Resampling.NEAREST)
        return small.resize(img.size, Image.Resampling.NEAREST)
    raise ValueError(f"unknown modification {cause!r}; choose one of {', '.join(CAUSES[1:])}")


def find_low_competency(images: Sequence[Image.Image], cause: str,
                        competency: Callable[[list[Image.Image]], Sequence[float]], threshold: float = 0.9,
                        factors: Sequence[float] | None = None, seed: int = 0) -> list[tuple[int, float, Image.Image]]:
    """For each image, the first factor that brings its competency below `threshold`:
    [(image index, factor, modified image)] for the images where one was found."""
    factors = tuple(factors if factors is not None else DEFAULT_FACTORS[cause])
    found: dict[int, tuple[float, Image.Image]] = {}
    for f in factors:
        todo = [i for i in range(len(images)) if i not in found]
        if not todo:
            break
        mods = [modify(images[i], cause, f, seed=seed + i) for i in todo]
        for i, m, c in zip(todo, mods, competency(mods)):
            if c < threshold:
                found[i] = (f, m)
    return [(i, f, m) for i, (f, m) in sorted(found.items())]
