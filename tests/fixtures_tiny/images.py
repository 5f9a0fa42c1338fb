"""Random-pixel image folders for end-to-end tests on tiny random models (content is irrelevant there)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def write_random_reference(root: Path, classes, per_class: int = 2, size: int = 32, seed: int = 0):
    """A reference folder (one sub-folder per class) and one query image; returns (reference_dir, query)."""
    rng = np.random.default_rng(seed)

    def noise() -> Image.Image:
        return Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8))

    ref = Path(root) / "reference"
    for c in classes:
        (ref / c).mkdir(parents=True)
        for i in range(per_class):
            noise().save(ref / c / f"{i}.png")
    query = Path(root) / "query.png"
    noise().save(query)
    return ref, query


def write_colour_folders(root: Path, classes, rng, per_class: int = 6, size: int = 24) -> Path:
    """A labelled class-folder tree whose class `c` is told by a bright channel `c` (a tiny classifier can learn
    it in a few steps): root/<class>/<i>.png. Returns root."""
    root = Path(root)
    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            a = rng.integers(0, 60, (size, size, 3)).astype(np.uint8)
            a[..., c] = rng.integers(160, 255, (size, size))
            Image.fromarray(a).save(root / name / f"{i}.png")
    return root
