"""Evidence for a report: the held-out conditions where the two models differ most, each with a few of its
images on which their predictions disagree.

Images are not kept with the measurements (sources regenerate them for (condition, m, seed)); here the few
shown are regenerated once, checked against the stored predictions' count, and stored as artifacts of the
result record, so a report needs neither the models nor the source.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...base.job_context import JobContext
from .differences import ConditionMeasurement
from .result import Evidence, EvidenceImage


def strongest(test: Sequence[ConditionMeasurement], k: int) -> list[ConditionMeasurement]:
    """The k conditions with the largest |accuracy difference| (ties: grid order), differences only."""
    ranked = sorted((m for m in test if m.delta != 0), key=lambda m: -abs(m.delta))
    # Show both directions when both exist: alternate A-better and B-better conditions by strength.
    a_wins = [m for m in ranked if m.delta > 0]
    b_wins = [m for m in ranked if m.delta < 0]
    out: list[ConditionMeasurement] = []
    while len(out) < k and (a_wins or b_wins):
        for side in (a_wins, b_wins):
            if side and len(out) < k:
                out.append(side.pop(0))
    return out


def collect_evidence(test: Sequence[ConditionMeasurement], generator: Any, *, m: int, seed: int,
                     conditions: int = 4, images_per_condition: int = 4,
                     ctx: JobContext | None = None) -> tuple[list[Evidence], dict[str, Any]]:
    """(evidence records, {artifact name: PIL image}) for the strongest differences."""
    evidence: list[Evidence] = []
    artifacts: dict[str, Any] = {}
    for i, meas in enumerate(strongest(test, conditions)):
        if ctx is not None:
            ctx.check_cancelled()
        pairs = list(generator.sample(meas.condition, m, seed, ctx=ctx))
        record = Evidence(meas.condition.to_dict(), meas.condition.text, meas.n, meas.accuracy_a, meas.accuracy_b)
        if len(pairs) == meas.n == len(meas.predictions_a) == len(meas.predictions_b):
            disagree = [j for j in range(meas.n) if meas.predictions_a[j] != meas.predictions_b[j]]
            for j in disagree[:images_per_condition]:
                name = f"evidence-{i}-{j}"
                artifacts[name] = pairs[j][0]
                record.images.append(EvidenceImage(name, str(pairs[j][1]), meas.predictions_a[j],
                                                   meas.predictions_b[j]))
        evidence.append(record)
    return evidence, artifacts
