"""The result of a model-difference analysis: plain dataclasses that round-trip through JSON.

`ModelDiffResult.kind == "model"` and `.analysis == "model-diff"` (the analysis registry's vocabulary). It holds
the per-condition measurements (observed and held-out test), one `MethodExplanation` per method with its
held-out scores and their n, Optimization's iteration records, and a manifest of everything that determined it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...results import ResultBase, from_plain
from .attribution import Attribution
from .differences import ConditionMeasurement


@dataclass
class ExplanationScore:
    """Scores of one explanation on n conditions (Completeness undefined -> 0.0 and flagged)."""

    completeness: float
    n: int
    tokens: int
    density: float | None = None
    completeness_undefined: bool = False
    density_undefined: bool = False  # the perturbed Completeness was undefined
    unparsed: int = 0  # evaluator replies that could not be read (counted as "cannot be determined")
    unparsed_dropped: int = 0  # the same for the word-dropped copies (Density)

    def objective(self, kind: str) -> float:
        if kind == "completeness":
            return self.completeness
        return self.completeness + (self.density or 0.0)


@dataclass
class CandidateRecord:
    id: str  # "t<iteration>-<index>" (t0 = the initial summaries)
    text: str
    parent: str | None = None
    feedback: str | None = None
    score: ExplanationScore | None = None  # on the conditions explored so far (C_t)
    objective: float | None = None
    kept: bool = False
    error: str | None = None  # why the LLM's reply gave no candidate
    raw_reply: str | None = None


@dataclass
class ExploredCondition:
    condition: dict[str, Any] | None
    strategy: str | None
    valid: bool
    reason: str | None = None  # why it was dropped (invalid, repeated)
    proposal: Any = None  # what the LLM wrote for it


@dataclass
class IterationRecord:
    t: int
    explored: list[ExploredCondition] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # the new result lines shown to the update step
    rescored: list[CandidateRecord] = field(default_factory=list)  # the beam rescored on C_t
    candidates: list[CandidateRecord] = field(default_factory=list)  # children written at t
    beam: list[str] = field(default_factory=list)  # candidate ids kept, best first
    best_objective: float | None = None
    n_conditions: int = 0  # |C_t|
    llm_calls: int = 0
    evaluator_calls: int = 0
    seconds: float = 0.0
    explore_reply: str | None = None


@dataclass
class MethodExplanation:
    method: str  # "raw-differences" | "summarization" | "optimization" | "user"
    text: str
    score: ExplanationScore | None  # on the held-out test conditions
    observed_conditions: int = 0  # conditions whose differences the method saw
    error: str | None = None
    attribution: Attribution | None = None  # which words carry the score (attribution.py); None when off


@dataclass
class EvidenceImage:
    artifact: str  # the name of the image artifact on the result's store record
    truth: str
    prediction_a: str
    prediction_b: str


@dataclass
class Evidence:
    """A held-out condition where the models differ most, with images on which their predictions disagree
    (regenerated from the source for (condition, m, seed), so they are the images that were measured)."""

    condition: dict[str, Any]
    text: str  # the condition as the prompts show it (a T2I condition: the prompt)
    n: int
    accuracy_a: float
    accuracy_b: float
    images: list[EvidenceImage] = field(default_factory=list)


@dataclass
class ModelDiffResult(ResultBase):
    kind: str = "model"
    analysis: str = "model-diff"
    version: str = "1"
    explanations: list[MethodExplanation] = field(default_factory=list)
    observed: list[ConditionMeasurement] = field(default_factory=list)
    test: list[ConditionMeasurement] = field(default_factory=list)
    iterations: list[IterationRecord] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    result_key: str | None = None

    def explanation(self, method: str) -> MethodExplanation | None:
        return next((e for e in self.explanations if e.method == method), None)


def iteration_from_dict(d: dict[str, Any]) -> IterationRecord:
    """One Optimization iteration record (as cached per iteration, optimization.py)."""
    return from_plain(IterationRecord, d)
