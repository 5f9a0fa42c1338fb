"""Image-sentence relevance Gamma for the evaluation (never used by the selection methods).

`AttributeRelevance`: attribute columns of a CSV manifest (path,label,<attr>,...) matched against each
sentence's `requires` ({column: value}); an image is relevant to a sentence when every listed column has
that value (case and surrounding spaces ignored). VQA relevance (the paper's App. C.3, a yes/no question per
image and sentence to one or more MLLMs) is `vqa.VqaRelevance`. Any object with `matrix(paths, sentences) ->
(M, N) bool` and `identity()` can be injected instead.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ...base.errors import ConfigError
from .sentences import Sentence


@runtime_checkable
class Relevance(Protocol):
    def matrix(self, paths: Sequence[str], sentences: Sequence[Sentence]) -> np.ndarray:
        """(len(paths), len(sentences)) booleans."""

    def identity(self) -> dict[str, Any]:
        """What determines the matrix (recorded in the result key)."""


def _norm(v: str) -> str:
    return " ".join(str(v).lower().split())


class AttributeRelevance:
    def __init__(self, manifest: str | Path) -> None:
        self.manifest = Path(manifest).expanduser().resolve()
        try:
            with open(self.manifest, newline="", encoding="utf-8-sig") as f:
                reader = csv.DictReader(f)
                cols = {(h or "").strip().lower(): h for h in reader.fieldnames or []}
                if "path" not in cols:
                    raise ConfigError(f"{self.manifest.name} has no 'path' column.",
                                      hint="Attribute relevance reads the CSV manifest the index was built from.")
                self.columns = sorted(c for c in cols if c != "path")
                self._attrs: dict[str, dict[str, str]] = {}
                for row in reader:
                    p = Path((row.get(cols["path"]) or "").strip()).expanduser()
                    full = os.path.normpath(p if p.is_absolute() else self.manifest.parent / p)
                    self._attrs[full] = {c: _norm(row.get(cols[c]) or "") for c in self.columns}
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ConfigError(f"Cannot read the manifest {self.manifest}: {exc}") from exc
        self._stat = self.manifest.stat()

    def identity(self) -> dict[str, Any]:
        return {"source": "attributes", "manifest": str(self.manifest), "mtime": self._stat.st_mtime,
                "size": self._stat.st_size}

    def matrix(self, paths: Sequence[str], sentences: Sequence[Sentence]) -> np.ndarray:
        missing = [s.text for s in sentences if not s.requires]
        if missing:
            raise ConfigError(f"{len(missing)} sentence(s) say nothing about the manifest's attributes, e.g. "
                              f"'{missing[0]}'.", hint="For attribute relevance every sentence needs 'requires': "
                              "{column: value}; evaluate with a sentence file that declares them.")
        unknown = sorted({c for s in sentences for c in s.requires if c.strip().lower() not in self.columns})
        if unknown:
            raise ConfigError(f"The manifest has no column(s) {', '.join(unknown)}.",
                              hint=f"Its attribute columns: {', '.join(self.columns) or 'none'}.")
        out = np.zeros((len(paths), len(sentences)), bool)
        for i, p in enumerate(paths):
            attrs = self._attrs.get(os.path.normpath(str(p)), {})
            for j, s in enumerate(sentences):
                out[i, j] = all(attrs.get(c.strip().lower()) == _norm(v) for c, v in s.requires.items())
        return out
