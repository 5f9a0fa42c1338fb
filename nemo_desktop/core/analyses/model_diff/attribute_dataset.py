"""A condition source over the user's own labelled images: a CSV `path,label,<attribute>...`.

Every distinct combination of the attribute columns is a condition (a grid of the values seen); G(c) returns
up to m of that cell's images, drawn deterministically for the seed (fewer when the cell has fewer: the
measured n says so). Relative paths are resolved against the CSV's folder.
"""
from __future__ import annotations

import csv
import hashlib
import random
from pathlib import Path
from typing import Any, Mapping

from ...base.errors import ConfigError
from ...base.images import load_image
from .conditions import Attribute, Condition, ConditionSpace


class AttributeDataset:
    def __init__(self, csv_path: str | Path, *, task_description: str | None = None) -> None:
        self.path = Path(csv_path).expanduser()
        try:
            with self.path.open(encoding="utf-8-sig", newline="") as fh:
                rows = list(csv.DictReader(fh))
        except FileNotFoundError:
            raise ConfigError(f"The dataset file {self.path} does not exist.") from None
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ConfigError(f"Cannot read the dataset file {self.path}.", detail=repr(exc)) from exc
        if not rows or not {"path", "label"} <= set(rows[0]):
            raise ConfigError(f"{self.path} needs a header with 'path', 'label' and attribute columns, and rows.")
        attrs = [k for k in rows[0] if k not in ("path", "label")]
        if not attrs:
            raise ConfigError(f"{self.path} has no attribute columns besides path and label.")
        self._cells: dict[str, list[tuple[Path, str]]] = {}
        conds: dict[str, Condition] = {}
        for n, row in enumerate(rows, start=2):
            if not row.get("path") or not row.get("label"):
                raise ConfigError(f"Line {n} of {self.path} has an empty path or label.")
            cond = Condition(tuple((a, str(row[a]).strip()) for a in attrs), row["label"].strip())
            conds.setdefault(cond.id, cond)
            p = Path(row["path"])
            self._cells.setdefault(cond.id, []).append((p if p.is_absolute() else self.path.parent / p, cond.label))
        labels = tuple(dict.fromkeys(r["label"].strip() for r in rows))
        values = {a: tuple(dict.fromkeys(str(r[a]).strip() for r in rows)) for a in attrs}
        self.space = ConditionSpace(name=f"dataset:{self.path.name}",
                                    task_description=task_description or f"classifying images into {', '.join(labels)}",
                                    open_conditions=tuple(conds.values()), labels=labels,
                                    extra={"attributes": [Attribute(a, values[a]).__dict__ for a in attrs]})
        self._sha = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]

    @property
    def info(self) -> Mapping[str, Any]:
        return {"source": "attribute-dataset", "version": 1, "csv": str(self.path), "csv_sha256": self._sha}

    def sample(self, condition: Condition, m: int, seed: int, *, ctx: Any = None) -> list:
        cell = self._cells.get(condition.id)
        if not cell:
            raise ConfigError(f"The dataset has no images for '{condition.text}'.")
        picks = random.Random(f"{seed}:{condition.id}").sample(cell, min(int(m), len(cell)))
        return [(load_image(p), label) for p, label in picks]
