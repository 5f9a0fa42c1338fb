"""Models of a benchmark run, loaded on first use and released when the next one of the same kind is needed."""
from __future__ import annotations

import gc
from typing import Any, Callable

from .config import BenchConfig, ModelRef


class ModelPool:
    """Loaded models by kind: at most one classifier, MLLM and editor at a time (GPU memory), all judges."""

    def __init__(self, loader: Callable[[ModelRef], Any]) -> None:
        self._loader = loader
        self._loaded: dict[str, tuple[str, Any]] = {}

    def get(self, ref: ModelRef, slot: str | None = None) -> Any:
        slot = slot or ref.kind
        held = self._loaded.get(slot)
        if held is not None and held[0] == ref.label:
            return held[1]
        if held is not None:
            self.release(slot)
        model = self._loader(ref)
        self._loaded[slot] = (ref.label, model)
        return model

    def release(self, *slots: str) -> None:
        released = False
        for slot in list(slots or self._loaded):
            held = self._loaded.pop(slot, None)
            if held is not None:
                released = True
                fn = getattr(held[1], "unload", None)
                if callable(fn):
                    fn()
        if released:
            gc.collect()  # drop the last references before the next model is loaded


def default_loader(config: BenchConfig) -> Callable[[ModelRef], Any]:
    from ..models.families import LoadOptions, load_model

    options = LoadOptions(device=config.device, dtype=config.dtype)
    return lambda ref: load_model(ref.spec(), options)
