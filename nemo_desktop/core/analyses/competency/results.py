"""Result shapes of the competency analyses; each serialises to plain JSON through the shared result base
(core/results: `to_dict` / `from_dict`, `key`).

Images are never held here: they are artifacts in the results store referenced by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...results import Record, ResultBase

ESTIMATOR_ANALYSIS = "competency-estimator"
COUNTERFACTUAL_ANALYSIS = "competency-cf"
BENCH_ANALYSIS = "competency-bench"
# Result versions (part of every key; bump when a result changes for the same inputs). Here, not in the pipeline
# modules, so the registry lists the analyses without importing torch.
ESTIMATOR_VERSION = "1"
COUNTERFACTUAL_VERSION = "2"  # 2: the MLLM sees the classifier's input view of the original
BENCH_VERSION = "1"


# Which part of competency = confidence x P(ID) is low at a threshold tau: one rule for every output (per-image
# lines, summaries, reports). "product": both parts are at or above tau but their product is below it (e.g. 0.92 x
# 0.93 = 0.86 < 0.9), so neither part alone is to blame.
LOW_PARTS = ("competent", "unsure", "unfamiliar", "both", "product")
LOW_PART_TEXT = {"competent": "competent", "unsure": "the classifier is unsure",
                 "unfamiliar": "the image is unfamiliar",
                 "both": "the classifier is unsure and the image is unfamiliar",
                 "product": "neither part is below the threshold, but their product is"}


def low_part(score: Any, threshold: float) -> str:
    """One of LOW_PARTS for a CompetencyScore (or its dict) at `threshold`."""
    get = score.get if isinstance(score, dict) else lambda k: getattr(score, k)
    unsure, unfamiliar = get("confidence") < threshold, get("id_probability") < threshold
    if unsure and unfamiliar:
        return "both"
    if unsure:
        return "unsure"
    if unfamiliar:
        return "unfamiliar"
    return "product" if get("competency") < threshold else "competent"


def calibration_source_text(dataset: dict[str, Any]) -> str:
    """Which images calibrated an estimator, in words (a manifest's `dataset` part; older fits had only the split)."""
    src = dataset.get("calibration") or {"kind": "split"}
    n = dataset.get("n_calibration")
    if src.get("kind") == "set":
        return (f"a separate calibration set, {src.get('path') or 'given by the caller'} ({n} images; every fit "
                "image trained the autoencoder)")
    frac = src.get("fraction")
    share = f"{100 * frac:.0f}% " if isinstance(frac, (int, float)) else ""
    return f"{n} images ({share}of each class) held out of the fit set"


@dataclass
class CompetencyScore(Record):
    """Competency and its parts: low confidence means the model is unsure; low P(ID) that the image is
    unfamiliar (its reconstruction loss is high for the predicted class)."""

    competency: float
    confidence: float  # maximum softmax probability
    id_probability: float  # sum_c p_c P_c(X)
    reconstruction_loss: float
    loss_z_score: float  # (L - mu) / sigma for the predicted class's calibration statistics
    pred_index: int
    pred_name: str


@dataclass
class EstimatorFitResult(ResultBase):
    manifest: dict[str, Any]
    statistics: dict[str, Any]
    calibration: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    weights_artifact: str = "weights"  # safetensors bytes in the store
    result_key: str | None = None
    kind: str = "fit"
    analysis: str = ESTIMATOR_ANALYSIS


@dataclass
class CounterfactualOutput(Record):
    """One generator's counterfactual for one image."""

    method: str
    artifact: str | None = None  # the counterfactual image
    diff_artifact: str | None = None  # |original - counterfactual| heat map
    competency_before: float | None = None
    competency_after: float | None = None
    score_after: CompetencyScore | None = None
    success: bool | None = None
    iterations: int | None = None
    lpips: float | None = None
    feature_similarity: float | None = None
    latent_similarity: float | None = None
    seconds: float | None = None
    explanation: str | None = None  # the MLLM's answer with this counterfactual shown
    error: str | None = None  # why this output is missing or incomplete


@dataclass
class CompetencyCounterfactualResult(ResultBase):
    image_sha256: str
    original: CompetencyScore
    counterfactuals: list[CounterfactualOutput] = field(default_factory=list)
    explanation_without: str | None = None  # the MLLM's answer from the original alone (prompt B.4)
    image_path: str | None = None
    input_artifact: str = "input"
    evidence: dict[str, str] = field(default_factory=dict)  # label -> artifact ("reconstruction", ...)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    result_key: str | None = None
    kind: str = "sample"
    analysis: str = COUNTERFACTUAL_ANALYSIS

    def output(self, method: str) -> CounterfactualOutput:
        for o in self.counterfactuals:
            if o.method == method:
                return o
        raise KeyError(f"no counterfactual from {method!r} in this result")


@dataclass
class GeneratorMetrics(Record):
    """One row of the seed's Tables 1/2 for one generator ("orig" = the original images)."""

    method: str
    n: int  # low-competency images given
    n_success: int
    success_rate: float
    lpips: float | None  # means over valid (successful) pairs, as the reference does
    feature_similarity: float | None
    latent_similarity: float | None
    fd: float | None  # Frechet distance to the reference set in the chosen feature space
    kd: float | None  # kernel (MMD^2) distance, same space
    seconds_per_image: float
    notes: list[str] = field(default_factory=list)
    available: bool = True  # False: the generator could not run (its notes say why); its zeros are not results


@dataclass
class CompetencyBenchResult(ResultBase):
    rows: list[GeneratorMetrics]
    feature_space: str
    n_reference: int
    manifest: dict[str, Any] = field(default_factory=dict)
    result_key: str | None = None
    kind: str = "dataset"
    analysis: str = BENCH_ANALYSIS

    def row(self, method: str) -> GeneratorMetrics:
        return next(r for r in self.rows if r.method == method)
