"""A synthetic renderer of coloured, rotated handwritten digits (the seed's CMNIST setting).

Glyphs are the 1,797 real 8x8 handwritten digits shipped in `resources/model_diff/digits_8x8.npz` (UCI, via
scikit-learn). A glyph is upsampled to `size` px, optionally thickened, rotated by `angle` degrees and
coloured as ReBias does: coloured background and white strokes (`colour_target="background"`, the seed's
A.3) or coloured strokes on black (`"ink"`). The glyphs are split deterministically: `index % 5 == 0` is the
`eval` pool the generator draws from, the rest the `train` pool (`training_set` for demo models), so the
measured differences come from handwriting the demo models never saw.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np
from PIL import Image, ImageFilter

from ...base.errors import ConfigError
from ...base.resources import resource_path
from .conditions import Condition, ConditionSpace, load_grid

COLOUR_TARGETS = ("background", "ink")
STROKES = {"thin": 0, "normal": 0, "bold": 3}  # MaxFilter size (0 = none); "thin" erodes instead


@lru_cache(maxsize=1)
def _glyphs() -> tuple[np.ndarray, np.ndarray]:
    with np.load(resource_path("model_diff", "digits_8x8.npz"), allow_pickle=False) as data:
        return data["images"].astype(np.float32), data["labels"].astype(np.int64)


def glyph_pool(pool: str) -> tuple[np.ndarray, np.ndarray]:
    """(images 8x8 in 0..16, labels) of the `eval` or `train` pool (or `all`)."""
    images, labels = _glyphs()
    idx = np.arange(len(labels))
    if pool == "eval":
        keep = idx % 5 == 0
    elif pool == "train":
        keep = idx % 5 != 0
    elif pool == "all":
        keep = np.ones_like(idx, dtype=bool)
    else:
        raise ConfigError(f"Unknown glyph pool '{pool}'.", hint="Use eval, train or all.")
    return images[keep], labels[keep]


def render_digit(glyph: np.ndarray, *, rgb: Sequence[int], angle: float = 0.0, size: int = 28,
                 colour_target: str = "background", stroke: str = "normal") -> Image.Image:
    """One RGB image of an 8x8 glyph (values 0..16)."""
    if colour_target not in COLOUR_TARGETS:
        raise ConfigError(f"Unknown colour target '{colour_target}'.", hint="Use background or ink.")
    alpha = Image.fromarray((np.clip(glyph, 0, 16) / 16.0 * 255).astype(np.uint8), "L")
    alpha = alpha.resize((size, size), Image.Resampling.BILINEAR)
    if stroke == "bold":
        alpha = alpha.filter(ImageFilter.MaxFilter(3))
    elif stroke == "thin":
        alpha = alpha.filter(ImageFilter.MinFilter(3))
    elif stroke != "normal":
        raise ConfigError(f"Unknown stroke '{stroke}'.", hint="Use thin, normal or bold.")
    if angle:
        alpha = alpha.rotate(float(angle), resample=Image.Resampling.BILINEAR, fillcolor=0)
    a = np.asarray(alpha, dtype=np.float32)[..., None] / 255.0
    colour = np.asarray(rgb, dtype=np.float32)[None, None, :]
    if colour_target == "background":
        out = colour * (1 - a) + 255.0 * a  # white strokes on the colour (ReBias)
    else:
        out = colour * a  # coloured strokes on black
    return Image.fromarray(np.clip(np.rint(out), 0, 255).astype(np.uint8), "RGB")


@dataclass
class SyntheticDigits:
    """ConditionGenerator over a digit grid (default: the shipped CMNIST grid)."""

    space: ConditionSpace = None  # type: ignore[assignment]
    size: int = 28
    colour_target: str = "background"
    pool: str = "eval"

    def __post_init__(self) -> None:
        if self.space is None:
            self.space = load_grid("cmnist")
        if "colors_rgb" not in self.space.extra:
            raise ConfigError(f"The grid '{self.space.name}' gives no RGB values for its colours.")
        if self.size < 8:
            raise ConfigError(f"Digit images must be at least 8 px (got {self.size}).")
        self._images, self._labels = glyph_pool(self.pool)

    @property
    def info(self) -> Mapping[str, Any]:
        images, _ = _glyphs()
        return {"source": "synthetic-digits", "version": 1, "grid": self.space.name, "size": self.size,
                "colour_target": self.colour_target, "pool": self.pool,
                "glyphs_sha256": hashlib.sha256(images.tobytes()).hexdigest()[:16]}

    def rgb(self, colour: str) -> list[int]:
        try:
            return list(self.space.extra["colors_rgb"][colour])
        except KeyError:
            raise ConfigError(f"The grid has no colour '{colour}'.") from None

    def sample(self, condition: Condition, m: int, seed: int, *, ctx: Any = None) -> list[tuple[Image.Image, str]]:
        digit = condition.get("digit")
        if digit is None or not digit.isdigit():
            raise ConfigError(f"The condition '{condition.text}' names no digit.")
        candidates = np.flatnonzero(self._labels == int(digit))
        rng = random.Random(f"{seed}:{condition.id}")
        picks = [int(candidates[rng.randrange(len(candidates))]) for _ in range(int(m))]
        colour = condition.get("color", "grey")
        angle = float(condition.get("angle", "0") or 0)
        stroke = condition.get("stroke", "normal") or "normal"
        rgb = self.rgb(colour)
        return [(render_digit(self._images[i], rgb=rgb, angle=angle, size=self.size,
                              colour_target=self.colour_target, stroke=stroke), condition.label) for i in picks]


def training_set(allowed_colours: Mapping[int, Sequence[str]], *, space: ConditionSpace | None = None,
                 size: int = 28, colour_target: str = "background", angles: Sequence[float] | None = None,
                 copies: int = 1, seed: int = 0) -> tuple[list[Image.Image], np.ndarray]:
    """Images of the `train` pool, each digit drawn only in its allowed colours, at random grid angles.

    For demo models with a planted bias (the seed's Model A: digits 0-4 in red only, 5-9 in all colours)."""
    space = space or load_grid("cmnist")
    colours = space.extra["colors_rgb"]
    angle_values = [float(a) for a in (angles or space.attribute("angle").values)]
    images, labels = glyph_pool("train")
    rng = random.Random(seed)
    out, ys = [], []
    for _ in range(copies):
        for glyph, y in zip(images, labels):
            colour = rng.choice(list(allowed_colours[int(y)]))
            out.append(render_digit(glyph, rgb=colours[colour], angle=rng.choice(angle_values), size=size,
                                    colour_target=colour_target))
            ys.append(int(y))
    return out, np.asarray(ys)
