"""A small planted-shortcut world for the fix tests: benchmarks/fix_world.py at a size that trains in seconds
(the benchmark's full size is what the figures are measured on)."""
from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[4] / "benchmarks"


def fix_world_module():
    if "fix_world" in sys.modules:
        return sys.modules["fix_world"]
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("fix_world", BENCHMARKS / "fix_world.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fix_world"] = module
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=None)
def tiny_world(train_size: int = 1400, epochs: int = 12, test_size: int = 150):
    import torch

    torch.set_num_threads(1)  # two shared cores: one thread trains these small CNNs many times faster
    return fix_world_module().build_fix_world(train_size=train_size, epochs=epochs, test_size=test_size,
                                              renderings=1)
