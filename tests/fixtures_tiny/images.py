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
