"""The one result shape every explanation method returns (SciTX and the baselines alike).

The workbench shows these side by side and the report engine renders them, so methods must fill this
shape rather than invent their own. Images are never held here: they live as artifacts in the results
store and are referenced by name (`artifact` fields), so a result serialises to plain JSON.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nemo_desktop.core.results import ResultBase


@dataclass
class ClassScore:
    index: int
    name: str
    prob: float


@dataclass
class SampleInfo:
    """The misclassified image and what the classifier said about it."""

    image_path: str
    image_sha256: str
    true_index: int
    true_name: str
    pred_index: int
    pred_name: str
    prob_true: float
    prob_pred: float
    top5: list[ClassScore] = field(default_factory=list)
    image_artifact: str | None = None  # name of the stored copy of the input image


@dataclass
class Observation:
    """A reference image retrieved for the survey (Set A: true class, B: predicted class, C: random)."""

    set_name: str  # "A" | "B" | "C"
    image_path: str
    image_sha256: str
    label_index: int
    label_name: str
    similarity: float | None = None
    caption: str | None = None
    thumbnail_artifact: str | None = None


@dataclass
class Candidate:
    """One hypothesis and the counterfactual test of it."""

    hypothesis: str
    intervention_kind: str | None = None  # "image" (edit instruction) | "prompt" (rewritten zero-shot prompt)
    intervention: str | None = None  # the edit instruction or the rewritten prompt
    edited_artifact: str | None = None  # counterfactual image (image interventions)
    prob_true_before: float | None = None
    prob_true_after: float | None = None
    cei: float | None = None
    top5_before: list[ClassScore] = field(default_factory=list)
    top5_after: list[ClassScore] = field(default_factory=list)
    error: str | None = None  # why this candidate could not be generated or scored
    raw_reply: str | None = None  # the model's raw text, kept for auditing
    # How far the counterfactual image moved from the original (metrics/edit_distance.py): 0 = identical,
    # ~1 = unrelated; the measure's name ("lpips-alex" | "1-ssim") goes with the value.
    edit_distance: float | None = None
    edit_distance_metric: str | None = None
    edit_flagged: bool = False  # the edit changed the whole image or did not keep its structure (edit_check.py)
    # Share of the counterfactual's structure that the original had (metrics/edit_structure.py, 0..1) and the
    # verdict drawn from it and the distance: "local", "global" (whole image changed, structure kept),
    # "destroyed" (structure not kept: noise, another picture) or "no change".
    edit_structure: float | None = None
    edit_verdict: str | None = None
    # Which reading of the structure measure gave `edit_structure` ("removal", "restoration", ...) and, in words,
    # which test decided the verdict (issue 45), for the result, the report and the app.
    edit_structure_reading: str | None = None
    edit_verdict_reason: str | None = None
    # The reference control (methods/edit_control.py): the same edit on references of other classes; its figures
    # (query CEI, control effect, n refs, in log-odds too, the rule, passed) or why it did not run; None where no
    # control applies.
    edit_control: dict[str, Any] | None = None
    # The MLLM's semantic check of the edit (methods/edit_semantic.py, SciTX's optional `edit_semantic_check`): its
    # verdict, the cue/scene answers and its one-sentence reason, or why it did not run; None where it was not asked.
    edit_semantic: dict[str, Any] | None = None


# The three outcomes of an explanation (ExplanationResult.outcome): kept apart in every table, summary and report.
OUTCOME_EXPLAINED, OUTCOME_NO_CAUSE, OUTCOME_NOT_TESTED = "explained", "no cause found", "nothing could be tested"


@dataclass
class ExplanationResult(ResultBase):
    method: str  # registry name: "scitx", "error-retrieval", "cam-mllm", "change-mllm", ...
    sample: SampleInfo
    explanation: str | None = None  # the selected natural-language explanation
    selected_index: int | None = None  # index into candidates, when the method validates candidates
    cei: float | None = None  # CEI of the selected candidate
    candidates: list[Candidate] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    evidence: dict[str, str] = field(default_factory=dict)  # label -> artifact name (Grad-CAM overlay, ...)
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    manifest: dict[str, Any] = field(default_factory=dict)  # models+revisions, prompt versions, seeds, date
    notes: list[str] = field(default_factory=list)  # e.g. "no correct reference of the predicted class"
    result_key: str | None = None  # key in the results store, once stored

    # The analysis-result protocol (core/registry/results.py; key, to_dict and from_dict from ResultBase): every
    # per-sample method returns this shape.
    kind = "sample"

    @property
    def analysis(self) -> str:
        return self.method

    def no_cause_found(self) -> str | None:
        """When the selected explanation did not raise P(true) (CEI <= 0), the sentence that says so; else None."""
        if self.explanation is None or self.cei is None or self.cei > 0:
            return None
        if any(c.edit_flagged and (c.cei or 0) > 0 for c in self.candidates):
            return (f"No hypothesis whose edit kept the image raised P(true) (best CEI {self.cei:+.1f}); only "
                    "flagged whole-image edits did")
        return f"No hypothesis raised P(true) (best CEI {self.cei:+.1f})"

    def outcome(self) -> tuple[str, str | None]:
        """Which of the three outcomes this result is, with the reason for the last two: ("explained", None);
        ("no cause found", why): hypotheses were tested and none is a cause (best CEI <= 0, or no candidate could
        be selected, e.g. every edit destroyed the picture); ("nothing could be tested", why): no candidate got a
        CEI (unreadable replies, failed edits). A method that does not score its explanation is "explained"."""
        no_cause = self.no_cause_found()
        if self.explanation is not None and not no_cause:
            return OUTCOME_EXPLAINED, None
        if no_cause:
            return OUTCOME_NO_CAUSE, no_cause
        tested = [c for c in self.candidates if c.cei is not None and c.error is None]
        notes = [n for n in self.notes if n and not n.startswith("Some steps failed with an error")]
        if tested:
            return OUTCOME_NO_CAUSE, " ".join(notes) or (
                f"{len(tested)} hypothes{'is was' if len(tested) == 1 else 'es were'} tested; none was selected.")
        errors: dict[str, int] = {}
        for c in self.candidates:
            if c.error:
                errors[c.error] = errors.get(c.error, 0) + 1
        if errors:
            common = max(errors, key=errors.get)
            n = len(self.candidates)
            why = (f"All {n} candidates failed" if sum(errors.values()) == n else
                   f"{sum(errors.values())} of {n} candidates failed") + f"; the most common error: {common}"
            if len(errors) > 1:
                why += f" (and {len(errors) - 1} other error{'s' if len(errors) > 2 else ''})"
            return OUTCOME_NOT_TESTED, why
        if notes:
            return OUTCOME_NOT_TESTED, " ".join(notes)
        return OUTCOME_NOT_TESTED, ("The method produced no candidate to test." if not self.candidates else
                                    "No candidate could be tested.")

    def candidate_order(self) -> list[int]:
        """Indices of the candidates as shown: the selected one first, then by CEI (largest first; unscored
        last), ties in drawing order."""
        def rank(j: int) -> tuple:
            c = self.candidates[j]
            return (j != self.selected_index, c.cei is None, -(c.cei or 0.0), j)

        return sorted(range(len(self.candidates)), key=rank)
