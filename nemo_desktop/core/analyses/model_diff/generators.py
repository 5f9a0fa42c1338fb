"""The one protocol every condition source satisfies: G(c) -> m labelled images.

    images = generator.sample(condition, m, seed)   # [(PIL RGB image, class name), ...]

Sources: `SyntheticDigits` (rendered coloured digits, the seed's CMNIST), `TextToImageConditions` (a
diffusers text-to-image model for open conditions) and `AttributeDataset` (a CSV of the user's own labelled
images with attribute columns). A source may return fewer than m images (a dataset cell holding fewer), never
more; the measured n is stored with every difference.
"""
from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from PIL import Image

from .conditions import Condition, ConditionSpace


@runtime_checkable
class ConditionGenerator(Protocol):
    space: ConditionSpace

    @property
    def info(self) -> Mapping[str, Any]:
        """What identifies the source in cache keys (name, version, data hash, model revision...)."""

    def sample(self, condition: Condition, m: int, seed: int, *,
               ctx: Any = None) -> Sequence[tuple[Image.Image, str]]:
        """Up to m (image, class name) pairs for the condition; deterministic for a seed."""
