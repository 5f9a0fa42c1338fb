"""The fix result: JSON-ready, with a lossless to_dict()/from_dict() round-trip (the shared result base)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...results import ResultBase

KIND = "fit"
ANALYSIS = "fix"
VERSION = "3"  # 2: the preservation term and weight interpolation; 3: the guard's minimum gain
STORE_KIND = "fix"


@dataclass
class FixResult(ResultBase):
    config: dict[str, Any]
    classifier: dict[str, Any]  # id, revision, family of the base model
    data: dict[str, Any]  # fingerprint, counts, description
    sources: list[dict[str, Any]]  # the targeted data: source, direction, class, count, instruction, editor
    trainable: dict[str, Any]  # mode, head, block, lora targets, trainable / total parameters
    training: dict[str, Any]  # TrainingRecord: epochs, steps, best epoch, early stop, resume, history, seconds
    affected: dict[str, Any]  # before/after on the finding's held-out images: overall, per class, confusions
    rest: dict[str, Any]  # the same on everything else
    guard: dict[str, Any]  # verdict, keep, margin, why, regressions
    saved: dict[str, Any] | None  # the new catalog entry (id, folder, weights, bytes) when kept and saved
    manifest: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    result_key: str | None = None
    # Per held-out image (the per-image table's fix columns): {"affected"|"rest": {"sha256": pixel hashes (content_hash
    # of the RGB image), "before": [class index], "after": [class index]}}; None in results stored before it existed.
    per_image: dict[str, Any] | None = None
    # Mode prompt (a zero-shot classifier's class prompts adopted): {"changes": {class: new prompt}, "before": {class:
    # old prompt}, "set": the prompt set a kept prompt is saved to}; `saved` is then {"name", "version"} of that set.
    prompts: dict[str, Any] | None = None
    kind: str = KIND
    analysis: str = ANALYSIS
    version: str = VERSION

    @property
    def adopts_prompt(self) -> bool:
        """A zero-shot fix: class prompts adopted, no weights trained."""
        return self.prompts is not None

    def summary(self) -> str:
        a, r = self.affected["overall"], self.rest["overall"]
        return (f"finding's images {100 * a['before']:.1f}% -> {100 * a['after']:.1f}% ({a['change']:+.1f} points, "
                f"n={a['n']}); everything else {100 * r['before']:.1f}% -> {100 * r['after']:.1f}% "
                f"({r['change']:+.1f} points, n={r['n']}); {self.guard['verdict']}")
