"""Eq. 2: Diff_Model(c) = accuracy of A minus accuracy of B on the m images G(c), measured once and stored.

Both classifiers see the same images in one batch each. A measurement keeps its n (the images the source
returned), both accuracies and each image's predictions (for the disagreement gallery); the images
themselves are not stored, as the sources regenerate them deterministically from (condition, m, seed).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from .cache import KIND_CONDITION, UnitMemo
from .conditions import Condition
from .labels import LabelMatch


@dataclass(frozen=True)
class ConditionMeasurement:
    condition: Condition
    n: int
    accuracy_a: float
    accuracy_b: float
    predictions_a: tuple[str, ...] = field(default=(), compare=False)
    predictions_b: tuple[str, ...] = field(default=(), compare=False)

    @property
    def delta(self) -> float:
        """Diff_Model: > 0 when A is more accurate."""
        return self.accuracy_a - self.accuracy_b

    def line(self) -> str:
        """The Raw Differences line of this condition (prompt text)."""
        return f"- {self.condition.text}: accuracy difference (A - B) = {100.0 * self.delta:+.1f}%"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["condition"] = self.condition.to_dict()
        d["predictions_a"], d["predictions_b"] = list(self.predictions_a), list(self.predictions_b)
        d["delta"] = self.delta
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ConditionMeasurement":
        return cls(Condition.from_dict(d["condition"]), int(d["n"]), float(d["accuracy_a"]),
                   float(d["accuracy_b"]), tuple(d.get("predictions_a", ())), tuple(d.get("predictions_b", ())))


def _predict(classifier: Any, images: Sequence[Any], indices: Sequence[int], labels: Sequence[str]) -> list[str]:
    """Predicted class name among the matched classes (the argmax over the model's own outputs; an output
    outside the matched classes counts as wrong and is named by its own class name)."""
    probs = np.asarray(classifier.predict_proba(list(images)))
    top = probs.argmax(axis=1)
    back = {int(i): lab for i, lab in zip(indices, labels)}
    names = list(classifier.class_names)
    return [back.get(int(t), str(names[int(t)])) for t in top]


class DifferenceMeter:
    """Measures Diff_Model per condition with two classifiers and a condition source."""

    def __init__(self, classifier_a: Any, classifier_b: Any, generator: Any, match: LabelMatch, *, m: int,
                 seed: int, memo: UnitMemo, key_parts: dict[str, Any]) -> None:
        if m < 1:
            raise ConfigError(f"Samples per condition must be at least 1 (got {m}).")
        self.a, self.b, self.generator, self.match = classifier_a, classifier_b, generator, match
        self.m, self.seed, self.memo, self.key_parts = int(m), int(seed), memo, key_parts
        self.classified_images = 0

    def key(self, condition: Condition) -> str:
        return self.memo.key(KIND_CONDITION, **self.key_parts, condition=condition.to_dict(), m=self.m,
                             seed=self.seed)

    def measure(self, condition: Condition, ctx: JobContext | None = None) -> ConditionMeasurement:
        key = self.key(condition)
        hit = self.memo.get(key)
        if hit is not None:
            return ConditionMeasurement.from_dict(hit)
        pairs = list(self.generator.sample(condition, self.m, self.seed, ctx=ctx))
        if not pairs:
            raise ConfigError(f"The condition source produced no image for '{condition.text}'.")
        images = [p[0] for p in pairs]
        truth = [self.match.labels[self.match.position(p[1])] for p in pairs]
        pred_a = _predict(self.a, images, self.match.index_a, self.match.labels)
        pred_b = _predict(self.b, images, self.match.index_b, self.match.labels)
        self.classified_images += len(images)
        n = len(images)
        acc_a = sum(p == t for p, t in zip(pred_a, truth)) / n
        acc_b = sum(p == t for p, t in zip(pred_b, truth)) / n
        result = ConditionMeasurement(condition, n, acc_a, acc_b, tuple(pred_a), tuple(pred_b))
        self.memo.put(key, KIND_CONDITION, result.to_dict())
        return result

    def measure_all(self, conditions: Sequence[Condition], ctx: JobContext, stage: str) -> list[ConditionMeasurement]:
        """Measure in order; cancel is checked between conditions (completed ones stay stored)."""
        return [self.measure(c, ctx) for c in ctx.track(list(conditions), stage=stage)]
