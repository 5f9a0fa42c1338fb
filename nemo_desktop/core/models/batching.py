"""Small pieces every classifier adapter shares: batches, OOM translation, L2 normalisation."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence, TypeVar

from ..base.errors import ConfigError
from ..base.device import translate_oom

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


def batch_from_free_memory(free_bytes: int | None, per_item_bytes: int | None, *, most: int = 8,
                           headroom: float = 0.8) -> int:
    """How many items of a batch fit: `headroom` of the free memory over what one item was measured to take,
    between 1 and `most`. Unknown free memory or per-item cost (nothing measured yet): 1."""
    if not free_bytes or not per_item_bytes or per_item_bytes <= 0:
        return 1
    return max(1, min(int(most), int(free_bytes * headroom // per_item_bytes)))


def cuda_free_bytes(device: str) -> int | None:
    """Free memory on a CUDA device for this process, within a cap set by
    torch.cuda.set_per_process_memory_fraction; None off CUDA."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    free, total = torch.cuda.mem_get_info(device)
    allocated = torch.cuda.memory_allocated(device)
    by_device = free + torch.cuda.memory_reserved(device) - allocated  # cached blocks are reusable
    by_cap = int(total * torch.cuda.get_per_process_memory_fraction(device)) - allocated
    return max(0, min(by_device, by_cap))
