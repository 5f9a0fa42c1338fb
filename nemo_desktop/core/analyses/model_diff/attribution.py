"""Token attribution (seed 002 §5.1 Figs. 4-5, App. "Attribute Score"): which words of an explanation carry its
score, by leave-one-out with the scoring already there.

The seed removes one token at a time and takes the change of the evaluator's loss, Loss(e without the token) -
Loss(e), normalised to [0, 1] with one factor for all tokens. The loss is not printed; with the evaluator's
answers we have Completeness, and the seed notes that loss and Completeness are inversely related, so we take
loss = 1 - Completeness: the attribution of a unit is

    delta = Completeness(e) - Completeness(e without the unit)     (same test conditions, same evaluator)

positive when removing the unit makes the evaluator's answers worse (the words carry the score), negative when
the explanation is better without them (they mislead). A unit is a whitespace word (the seed's tokens are
tokenizer tokens; words are what a reader can act on and what Density drops). Cost is bounded by two settings:
an explanation with more than `max_units` words is attributed by spans of ceil(words / max_units) consecutive
words, and only the first `conditions` test conditions are asked (0: all); every call goes through the
scorer's cache, so a re-run asks nothing. Scores are normalised by the largest positive delta over every
attributed explanation of the run (the seed's "same normalization factor"), negatives shown as 0. The effective
token ratio (Fig. 5) is the share of words whose score exceeds a threshold, for thresholds 0, 0.05, ..., 1; its
area (trapezoid over [0, 1]) is `auc`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...base.job_context import JobContext
from ...results import Record
from .differences import ConditionMeasurement
from .metrics import completeness

THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(21))


@dataclass
class Attribution(Record):
    units: list[str]  # the explanation split into the attributed pieces (words, or spans of words)
    delta: list[float]  # Completeness(e) - Completeness(e without the unit)
    score: list[float] = field(default_factory=list)  # delta normalised to [0, 1] over the run (negatives -> 0)
    words_per_unit: int = 1
    conditions: int = 0  # test conditions asked
    completeness: float = 0.0  # of the whole explanation on those conditions
    calls: int = 0  # evaluator questions this attribution needs (cached ones included)
    ratio: list[float] = field(default_factory=list)  # effective token ratio at THRESHOLDS (Fig. 5)
    auc: float | None = None


def spans(text: str, max_units: int) -> tuple[list[str], int]:
    """The text's words grouped into at most `max_units` consecutive spans (one word each when they fit)."""
    words = text.split()
    if max_units < 1:
        raise ValueError("max_units must be at least 1")
    per = max(1, math.ceil(len(words) / max_units))
    return [" ".join(words[i:i + per]) for i in range(0, len(words), per)], per


def without(units: Sequence[str], i: int) -> str:
    return " ".join(u for j, u in enumerate(units) if j != i)


def attribute(scorer: Any, text: str, measurements: Sequence[ConditionMeasurement], ctx: JobContext, *,
              max_units: int, conditions: int = 0) -> Attribution:
    """Leave-one-out attribution of `text` on `measurements` (the first `conditions` of them; 0 = all)."""
    ms = list(measurements[:conditions] if conditions else measurements)
    units, per = spans(text, max_units)
    deltas = [m.delta for m in ms]
    full = scorer.answers([(text, m) for m in ms], ctx)
    base = completeness(deltas, [a or 0 for a in full]).value
    out = []
    for i in range(len(units)):
        ctx.check_cancelled()
        ctx.progress("Token attribution", i, len(units))
        ans = scorer.answers([(without(units, i), m) for m in ms], ctx)
        out.append(base - completeness(deltas, [a or 0 for a in ans]).value)
    ctx.progress("Token attribution", len(units), len(units))
    return Attribution(units, out, words_per_unit=per, conditions=len(ms), completeness=base,
                       calls=len(ms) * (len(units) + 1))


def normalise(attributions: Sequence[Attribution]) -> None:
    """Scores in [0, 1] with one factor for all of them (the largest positive delta), and Fig. 5's curve."""
    top = max((d for a in attributions for d in a.delta), default=0.0)
    for a in attributions:
        a.score = [max(d, 0.0) / top if top > 0 else 0.0 for d in a.delta]
        n = len(a.score)
        a.ratio = [sum(s > t for s in a.score) / n if n else 0.0 for t in THRESHOLDS]
        step = THRESHOLDS[1] - THRESHOLDS[0]
        a.auc = sum((x + y) / 2 * step for x, y in zip(a.ratio, a.ratio[1:])) if n else None
