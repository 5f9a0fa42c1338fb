"""Constants and helpers shared by the data-layer tests (importable, unlike conftest)."""
from __future__ import annotations

import numpy as np

N_REFERENCE = 300  # digits 0..299 form the reference dataset; the rest train the classifier


def unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
