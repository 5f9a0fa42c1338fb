"""Grading competency explanations: did the MLLM name the true cause of low competency?

The seed graded by hand; its code pre-filters with keywords. NEMO grades with the existing LLM-Match judge
(judge.py), one criterion per cause (the texts below, written for NEMO from the seed's
descriptions of its six causes, section 3.2). `keyword_causes` is only a heuristic tag for tables and
filters, never a grade.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ..base.job_context import JobContext, null_context
from .judge import Criterion, LLMMatchJudge, Verdict, custom_criterion
from ..analyses.competency.causes import CAUSES

CAUSE_FACTORS = {
    "spatial": "the image contains content unfamiliar to the classifier: an object, region or class that was not "
               "in its training images",
    "brightness": "the image's brightness differs from the training images (it is too bright / overexposed or "
                  "too dark)",
    "contrast": "the image's contrast differs from the training images (too high or too low contrast)",
    "saturation": "the image's colour saturation differs from the training images (over- or under-saturated, "
                  "washed-out or overly vivid colours)",
    "noise": "the image is corrupted by random noise (grainy, speckled pixels)",
    "pixelation": "the image is pixelated (blocky, low resolution)",
}

_KEYWORDS = {
    "spatial": r"unfamiliar|unusual object|unknown|anomal|foreign|unexpected (?:object|content|shape)|not seen",
    "brightness": r"bright|dark|exposure|overexpos|underexpos|\bdim\b",
    "contrast": r"contrast",
    "saturation": r"saturat|vivid|washed[- ]out|colou?rful|vibran",
    "noise": r"nois|grain|fuzz|speckle|static",
    "pixelation": r"pixel|blocky|low[- ]resolution|jagged",
}


def cause_criterion(cause: str, dataset_name: str) -> Criterion:
    if cause not in CAUSE_FACTORS:
        raise ValueError(f"unknown cause {cause!r}; choose one of {', '.join(CAUSES)}")
    return custom_criterion(dataset_name, CAUSE_FACTORS[cause])


def grade_explanation(judge: LLMMatchJudge, explanation: str, cause: str, dataset_name: str) -> Verdict:
    """1.0 / 0.5 / 0.0 from the judge: does `explanation` describe `cause`? (stored and reused by the judge)"""
    return judge.judge(explanation, cause_criterion(cause, dataset_name))


def keyword_causes(text: Any) -> list[str]:
    """Causes whose keywords appear in the text (heuristic tag, in CAUSES order)."""
    low = str(text or "").lower()
    return [c for c in CAUSES if re.search(_KEYWORDS[c], low)]


@dataclass
class AccuracyRow:
    """One condition of the seed's Tables 3/4 for one cause: how often the explanation names the cause."""

    condition: str  # "original" (prompt B.4) or a generator whose counterfactual was shown (B.5)
    n: int  # explanations graded
    n_scored: int  # the judge returned a score (the others failed and are left out of the mean)
    accuracy: float | None  # mean judge score over the scored ones (1.0 full, 0.5 partial, 0.0 none)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def explanation_accuracy(results: Sequence[Any], cause: str, judge: LLMMatchJudge, dataset_name: str,
                         ctx: JobContext | None = None) -> list[AccuracyRow]:
    """Grade the explanations of competency-cf results whose true cause is `cause`: one row for the original
    alone and one per generator whose counterfactual was shown, in first-seen order."""
    ctx = ctx or null_context()
    criterion = cause_criterion(cause, dataset_name)
    texts: dict[str, list[str]] = {}
    for r in results:
        if r.explanation_without:
            texts.setdefault("original", []).append(r.explanation_without)
        for o in r.counterfactuals:
            if o.explanation:
                texts.setdefault(o.method, []).append(o.explanation)
    total, done, rows = sum(len(v) for v in texts.values()), 0, []
    for condition, items in texts.items():
        scores = []
        for text in items:
            ctx.check_cancelled()
            v = judge.judge(text, criterion)
            if v.score is not None:
                scores.append(v.score)
            done += 1
            ctx.progress("Grading explanations", done, total)
        rows.append(AccuracyRow(condition, len(items), len(scores), sum(scores) / len(scores) if scores else None))
    return rows
