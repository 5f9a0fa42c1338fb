"""A training checkpoint: one safetensors file (tensors) whose metadata holds the loop's state as JSON, written
atomically, so a kill leaves the previous checkpoint or the new one, never a mix of two epochs. No pickle is read.

A checkpoint of another run (another key) is left alone and not used. One in an older format (the fix's torch
files, the competency fit's safetensors + JSON pair, both before issue 41) or a damaged one is not resumed: it is
removed and training starts again, with a note in words (OLDER_VERSION) for the result.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

FORMAT = "nemo-training-checkpoint/1"
OLDER_VERSION = ("A checkpoint of this training was started by an older version of NEMO Desktop and cannot be "
                 "resumed; training started again.")
DAMAGED = "The checkpoint of this training could not be read ({why}); training started again."


class Checkpoint:
    """`path`: the checkpoint file (.safetensors); `key`: what the run is (a checkpoint of another key is not
    resumed); `older`: files an older version wrote for the same run (removed with a note when found)."""

    def __init__(self, path: str | Path, key: str, older: Sequence[str | Path] = ()):
        self.path, self.key, self.older = Path(path), key, [Path(p) for p in older]
        self.notes: list[str] = []

    def save(self, tensors: dict[str, Any], state: dict[str, Any]) -> None:
        from safetensors.torch import save

        from ..store import atomic_write_bytes

        meta = {"format": FORMAT, "key": self.key, "state": json.dumps(state)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, save({k: v.contiguous() for k, v in tensors.items()}, metadata=meta))

    def load(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(tensors, state) of this run's last checkpoint; None when there is none to resume (a note says why when
        one was found but cannot be used)."""
        from safetensors import safe_open

        for old in self.older:
            if old.is_file():
                self._refuse(old, OLDER_VERSION)
        if not self.path.is_file():
            return None
        try:
            with safe_open(str(self.path), framework="pt") as f:
                meta = f.metadata() or {}
                if meta.get("format") != FORMAT:
                    self._refuse(self.path, OLDER_VERSION)
                    return None
                if meta.get("key") != self.key:
                    return None  # another run's checkpoint: not ours to use or remove
                tensors = {k: f.get_tensor(k) for k in f.keys()}
            return tensors, json.loads(meta["state"])
        except Exception as exc:  # noqa: BLE001 - a truncated or damaged file: start again, say so
            self._refuse(self.path, DAMAGED.format(why=str(exc).splitlines()[0][:120] if str(exc) else
                                                   type(exc).__name__))
            return None

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def _refuse(self, path: Path, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)
        path.unlink(missing_ok=True)
