"""Where a counterfactual differs from its original: a per-pixel |a - b| heat map and its scale in words.

The difference of a pixel is the mean over R, G, B of |a - b| on the 0-255 scale, as a fraction of 255. The
heat map is normalised to the image's own largest difference (black = unchanged, white = the largest change),
so a small local edit is visible; the words say what white means in absolute terms, so a faint edit is not
mistaken for a strong one. The colour ramp is matplotlib's "hot" (black, red, yellow, white), computed here in
three lines rather than importing matplotlib for it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHANGED_AT = 0.10  # a pixel counts as "changed" when it moved by more than 10% of the full range


@dataclass(frozen=True)
class DifferenceMap:
    heat: np.ndarray  # HxWx3 uint8, the colour-mapped difference normalised to its maximum
    max_abs: float  # the largest per-pixel difference, 0..1 of the full range
    mean_abs: float  # the mean per-pixel difference, 0..1
    changed_fraction: float  # share of pixels that moved by more than CHANGED_AT

    @property
    def identical(self) -> bool:
        return self.max_abs == 0.0

    def in_words(self) -> str:
        if self.identical:
            return "The two images are identical: no pixel differs (the map is black)."
        return (f"Colour scale: black = unchanged, white = the largest change in this pair, which is "
                f"{self.max_abs:.0%} of the full brightness range ({self.max_abs * 255:.0f} of 255, mean over "
                f"R, G, B). Mean change {self.mean_abs:.1%}; {self.changed_fraction:.1%} of the pixels changed "
                f"by more than {CHANGED_AT:.0%}.")


def hot_colormap(values: np.ndarray) -> np.ndarray:
    """Values in [0, 1] to RGB uint8 along black, red, yellow, white (matplotlib's "hot")."""
    v = np.clip(values, 0.0, 1.0)
    rgb = np.stack([np.clip(v / 0.375, 0, 1), np.clip((v - 0.375) / 0.375, 0, 1), np.clip((v - 0.75) / 0.25, 0, 1)],
                   axis=-1)
    return np.round(rgb * 255).astype(np.uint8)


_HOT = hot_colormap(np.arange(256) / 255.0)  # a lookup table: a megapixel maps in milliseconds


def difference_map(original: np.ndarray, edited: np.ndarray) -> DifferenceMap:
    """`original` and `edited`: HxWx3 (or HxW) uint8 arrays of the same size."""
    a, b = np.asarray(original, np.uint8), np.asarray(edited, np.uint8)
    if a.shape != b.shape:
        raise ValueError(f"images to compare must have the same size, not {a.shape} and {b.shape}")
    diff = np.maximum(a, b) - np.minimum(a, b)  # |a - b| without leaving uint8
    channels = a.shape[2] if a.ndim == 3 else 1
    total = diff[..., 0].astype(np.uint16) if a.ndim == 3 else diff.astype(np.uint16)
    for k in range(1, channels):  # in place: several times faster than sum(axis=2) over a short last axis
        total += diff[..., k]
    full = 255 * channels  # the sum over channels when a pixel goes from black to white
    if total.size == 0 or not total.any():
        return DifferenceMap(np.zeros(total.shape + (3,), np.uint8), 0.0, 0.0, 0.0)
    peak = int(total.max())
    heat = np.take(_HOT, (total.astype(np.uint32) * 255 // peak).astype(np.uint8), axis=0)
    return DifferenceMap(heat, peak / full, float(total.mean()) / full, float((total > CHANGED_AT * full).mean()))
