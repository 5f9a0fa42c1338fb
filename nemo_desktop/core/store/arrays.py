"""Large arrays (reference-index embeddings) next to the database, memory-mapped on read."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..base.errors import StoreError
from .atomic import TMP_SUFFIX, atomic_writer
from .disk_space import write_error

_ARRAY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def numbered_arrays(arrays_dir: Path, prefix: str) -> dict[int, Path]:
    """The array files named `<prefix><number>` (e.g. the chunks of a matrix written in parts), by number."""
    out = {}
    if arrays_dir.is_dir():
        for p in arrays_dir.glob(f"{prefix}*.npy"):
            try:
                out[int(p.stem[len(prefix):])] = p
            except ValueError:
                continue
    return out


class ArraysMixin:
    """The array methods of ResultsStore (needs its `arrays_dir` and `store_dir`)."""

    arrays_dir: Path
    store_dir: Path

    def array_path(self, name: str) -> Path:
        if not _ARRAY_NAME_RE.match(name) or name.endswith(TMP_SUFFIX):
            raise ValueError(f"array name {name!r}: use letters, digits, '.', '_' and '-' only")
        return self.arrays_dir / f"{name}.npy"

    def save_array(self, name: str, arr: Any) -> Path:
        import numpy as np

        path = self.array_path(name)
        try:
            self.arrays_dir.mkdir(parents=True, exist_ok=True)
            with atomic_writer(path) as f:  # streamed: no second in-memory copy of a large matrix
                np.save(f, np.asarray(arr), allow_pickle=False)
        except OSError as exc:
            raise write_error("array file", path, exc, self.store_dir) from exc
        return path

    def open_array(self, name: str, mmap: bool = True):
        import numpy as np

        path = self.array_path(name)
        if not path.exists():
            raise StoreError(f"The stored array {name!r} is missing ({path}).",
                             hint="Rebuild what produced it (for example the reference index).")
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
