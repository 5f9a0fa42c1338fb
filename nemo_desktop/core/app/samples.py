"""A sample to explain: an image and its true class, as the dataset browser or a drop hands it over (Qt-free)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Sample:
    path: str
    true_label: str  # a class name of the classifier (or an index as text); resolved by the method
    pred_label: str | None = None  # what the classifier said, when known (for display only)
    confidence: float | None = None  # P(prediction), when known
    index_id: str | None = None  # the reference index the sample came from (its classifier's vocabulary)

    @property
    def name(self) -> str:
        return Path(self.path).name

    def describe(self) -> str:
        text = f"{self.name}: true {self.true_label}"
        if self.pred_label is not None:
            text += f", predicted {self.pred_label}"
            if self.confidence is not None:
                text += f" ({self.confidence:.2f})"
        return text
