"""Small pieces every classifier adapter shares: batches, OOM translation, L2 normalisation."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence, TypeVar

from ..errors import ConfigError
from .device import translate_oom

T = TypeVar("T")


def batched(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    if size < 1:
        raise ConfigError(f"Batch size must be at least 1 (got {size}).", hint="Use e.g. --batch-size 32.")
    for start in range(0, len(items), size):
        yield items[start:start + size]


@contextmanager
def oom_guard(what: str) -> Iterator[None]:
    """Turn a CUDA/host out-of-memory error into a clear OutOfMemoryError (memory freed, process usable)."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - only OOM is translated, everything else re-raised as is
        err = translate_oom(exc, what)
        if err is None:
            raise
        raise err from exc


def l2_normalize(features):
    """Row-wise unit vectors (float32); an all-zero row stays zero instead of becoming NaN."""
    features = features.float()
    return features / features.norm(dim=-1, keepdim=True).clamp_min(1e-12)
