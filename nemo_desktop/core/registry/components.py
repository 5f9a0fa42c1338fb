"""The loaded parts an analysis runs with, travelling as one bundle (diffusers' `components`)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .spec import ROLES


@dataclass
class Components:
    classifier: Any = None
    classifier_b: Any = None
    mllm: Any = None
    editor: Any = None
    embedder: Any = None
    generator: Any = None
    judge: Any = None
    reference: Any = None
    fitted: Any = None
    store: Any = None  # the results store; not a model, every analysis may take it

    def get(self, role: str) -> Any:
        return getattr(self, role)

    def given(self) -> list[str]:
        return [f.name for f in fields(self) if f.name in ROLES and getattr(self, f.name) is not None]

    @property
    def zero_shot(self) -> bool:
        return bool(getattr(self.classifier, "zero_shot", False))
