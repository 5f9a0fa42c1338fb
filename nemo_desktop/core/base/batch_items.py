"""The rows of a batch diagnosis (several images explained in one run): what happened to each image.

Qt-free: the desktop app's batch table and the combined batch report (reports/batch.py) read the same rows.
An image that was correctly classified is skipped by design and says so in a neutral style; only a real
failure (an unreadable image, a method that raised) is a failure. A method that ran to the end has one of three
outcomes (ExplanationResult.outcome): explained; "no cause found" (hypotheses were tested and none raised P(true),
or none could be selected), not a finding; "nothing could be tested" (no candidate got a CEI: unreadable replies,
failed edits), with the reason: it says nothing about the cause either way.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

WAITING = "waiting"
EXPLAINED = "explained"
NO_CAUSE = "no cause found"
NOT_TESTED = "nothing could be tested"
SKIPPED_CORRECT = "skipped (correctly classified)"
SKIPPED_NO_LABEL = "skipped (no true class)"
FAILED = "failed"
CANCELLED = "cancelled"

# Display order of the statuses (summaries list them in this order).
STATUSES = (EXPLAINED, NO_CAUSE, NOT_TESTED, SKIPPED_CORRECT, SKIPPED_NO_LABEL, FAILED, CANCELLED, WAITING)
# How a status is presented: a finding, neutral (nothing went wrong), a failure, or not finished yet.
TONE = {EXPLAINED: "finding", NO_CAUSE: "neutral", NOT_TESTED: "untested", SKIPPED_CORRECT: "neutral", SKIPPED_NO_LABEL: "neutral",
        FAILED: "failure", CANCELLED: "neutral", WAITING: "pending"}


@dataclass
class BatchItem:
    image_path: str
    true_name: str | None = None
    pred_name: str | None = None
    prob_pred: float | None = None
    status: str = WAITING
    result_key: str | None = None
    method: str | None = None
    cei: float | None = None
    explanation: str | None = None
    no_cause: str | None = None  # why no cause was found, or why nothing could be tested (its status says which)
    error: str | None = None
    hint: str | None = None
    label_note: str | None = None  # where the true class came from, or why there is none

    @property
    def name(self) -> str:
        return Path(self.image_path).name or self.image_path

    @property
    def tone(self) -> str:
        return TONE.get(self.status, "neutral")

    def finish(self, result) -> None:
        """Record an ExplanationResult (the method ran to the end)."""
        self.result_key = result.result_key
        self.method = result.method
        self.cei = result.cei
        self.explanation = result.explanation
        self.pred_name = result.sample.pred_name
        self.prob_pred = result.sample.prob_pred
        self.true_name = result.sample.true_name
        self.status, self.no_cause = result.outcome()

    def fail(self, error: dict | None) -> None:
        error = error or {}
        self.status = FAILED
        self.error = str(error.get("message") or "The method failed without a message.")
        self.hint = error.get("hint") or None

    def summary_text(self) -> str:
        """The explanation column: the explanation, the neutral no-cause sentence, the error, or why skipped."""
        if self.status == EXPLAINED:
            return self.explanation or ""
        if self.status == NO_CAUSE:
            return self.no_cause or "No hypothesis raised P(true)"
        if self.status == NOT_TESTED:
            return self.no_cause or "No candidate could be tested."
        if self.status == FAILED:
            return self.error or ""
        if self.status == SKIPPED_CORRECT:
            return "The classifier already predicts the true class: nothing to explain."
        if self.status == SKIPPED_NO_LABEL:
            return self.label_note or "No true class was given."
        if self.status == CANCELLED:
            return "The run was cancelled before this image."
        return ""

    def truth_text(self) -> str:
        return f"{self.true_name or '?'} \u2192 {self.pred_name or '?'}"


def count_statuses(items: list[BatchItem]) -> list[tuple[str, int]]:
    """(status, n) for every status that occurs, in display order."""
    counts = {s: 0 for s in STATUSES}
    for it in items:
        counts[it.status] = counts.get(it.status, 0) + 1
    return [(s, n) for s, n in counts.items() if n]


def describe_counts(items: list[BatchItem]) -> str:
    parts = "; ".join(f"{n} {_COUNT_WORDS.get(s, s)}" for s, n in count_statuses(items))
    return f"{len(items)} image{'s' if len(items) != 1 else ''}" + (f": {parts}" if parts else "")


# How a count reads in a summary line ("2 tested, no cause found" is not "2 nothing could be tested").
_COUNT_WORDS = {NO_CAUSE: "tested, no cause found", NOT_TESTED: "with nothing that could be tested"}


def to_json(item: BatchItem) -> dict:
    """One row as `--json` and exports give it: the outcome and its reason apart from the explanation."""
    return {"image": item.image_path, "true": item.true_name, "predicted": item.pred_name, "status": item.status,
            "explained": item.status == EXPLAINED,
            "tested": item.status == NO_CAUSE or (item.status == EXPLAINED and item.cei is not None),
            "reason": item.no_cause if item.status in (NO_CAUSE, NOT_TESTED) else (item.error or None),
            "explanation": item.explanation if item.status == EXPLAINED else None, "cei": item.cei,
            "result_key": item.result_key, "method": item.method}


def true_class_from_folder(image_path: str, mapping) -> tuple[str | None, str]:
    """The true class named by the image's folder (`.../cat/x.jpg` -> "cat"), matched against the classifier's
    classes the way dataset folders are (data.datasets.LabelMapping: exact, WordNet id, then case, underscore,
    hyphen and space-insensitive), and a note that says where it came from or why there is none."""
    folder = Path(image_path).parent.name
    if not folder:
        return None, "the image is not inside a folder"
    found = mapping.resolve(folder)
    if isinstance(found, int):
        return mapping.class_names[found], f"from the folder name '{folder}'"
    return None, f"the folder name '{folder}' is not a class of the classifier ({found})"
