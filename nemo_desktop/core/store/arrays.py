"""Large arrays (reference-index embeddings) next to the database, memory-mapped on read."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..base.errors import StoreError
from .atomic import TMP_SUFFIX, atomic_writer
from .disk_space import disk_full_error, is_disk_full

_ARRAY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


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
            if is_disk_full(exc, path):
                raise disk_full_error(path, exc, self.store_dir) from exc
            raise StoreError(f"Could not write the array file {path}.",
                             hint="Check free disk space and the store folder's permissions.",
                             detail=repr(exc)) from exc
        return path

    def open_array(self, name: str, mmap: bool = True):
        import numpy as np

        path = self.array_path(name)
        if not path.exists():
            raise StoreError(f"The stored array {name!r} is missing ({path}).",
                             hint="Rebuild what produced it (for example the reference index).")
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
