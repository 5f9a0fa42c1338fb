"""The competency analyses in the registry (core/registry): one `fit` entry and one `sample` entry.

    fit = build_analysis("competency-estimator", Components(classifier=clf, store=store), {"epochs": 50})
    fitted = fit(dataset_or_folder, ctx)                 # -> EstimatorFitResult, stored with its weights
    cf = build_analysis("competency-cf", Components(classifier=clf, mllm=mllm, fitted=fitted, store=store))
    result = cf(image, ctx)                              # -> CompetencyCounterfactualResult

`fitted` may be the FittedEstimator itself, the stored EstimatorFitResult, a results-store key (or a unique
prefix of one) or a folder written by `FittedEstimator.save`; it is bound to the injected classifier, whose
id, revision and class names must be the ones the estimator was fitted for.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from ...registry import AnalysisSpec, Inputs
from .config import CompetencyBenchConfig, CounterfactualConfig, EstimatorConfig
from .results import (BENCH_ANALYSIS, BENCH_VERSION, COUNTERFACTUAL_ANALYSIS, COUNTERFACTUAL_VERSION,
                      ESTIMATOR_ANALYSIS, ESTIMATOR_VERSION, CompetencyBenchResult, CompetencyCounterfactualResult,
                      EstimatorFitResult)
from .score_set import ANALYSIS as SCORE_ANALYSIS
from .score_set import VERSION as SCORE_VERSION
from .score_set import CompetencyScoreAnalysis, CompetencyScoreConfig, CompetencyScoreSet

# Listing the registry imports this module: the estimator, the generators and the metrics (torch, scipy) are
# imported only when an analysis is built (tests/core/test_registry_listing.py).
if TYPE_CHECKING:
    from .estimator import FittedEstimator


def stored_estimator_key(store: Any, ref: str) -> str:
    """The full key of the stored estimator `ref` names (a key or a unique prefix of one)."""
    ref = ref.strip().lower()
    if store is None:
        raise ConfigError("Loading a stored competency estimator needs the results store.")
    if len(ref) == 64 and store.has(ref):
        return ref
    keys = [r.key for r in store.find(kind=ESTIMATOR_ANALYSIS) if r.key.startswith(ref)] if len(ref) >= 6 else []
    if len(keys) == 1:
        return keys[0]
    if len(keys) > 1:
        raise ConfigError(f"'{ref}' is the start of {len(keys)} stored estimators.", hint="Give more of the key.")
    raise ConfigError(f"No competency estimator is stored under '{ref}' (and it is not a folder).",
                      hint="Fit one first (`nemo competency fit`); its key is printed when it is stored.")


def resolve_estimator(fitted: Any, classifier: Any, store: Any = None) -> FittedEstimator:
    """The FittedEstimator `fitted` refers to, bound to `classifier` (see the module docstring)."""
    from .estimator import FittedEstimator, _check_classifier

    if isinstance(fitted, FittedEstimator):
        if classifier is not None and classifier is not fitted.classifier:
            _check_classifier(fitted.manifest, classifier)
        return fitted
    if classifier is None:
        raise ConfigError("A stored competency estimator is loaded for a classifier, and none was given.",
                          hint="Give the classifier it was fitted for (--classifier).")
    if isinstance(fitted, EstimatorFitResult):
        if not fitted.result_key:
            raise ConfigError("This estimator fit was not stored, so its weights cannot be loaded.")
        return FittedEstimator.from_store(store, fitted.result_key, classifier)
    if isinstance(fitted, (str, os.PathLike)):
        path = Path(fitted).expanduser()
        if path.is_dir():
            return FittedEstimator.load(path, classifier)
        return FittedEstimator.from_store(store, stored_estimator_key(store, str(fitted)), classifier)
    raise ConfigError(f"Not a competency estimator: {type(fitted).__name__}.")


class CompetencyEstimatorAnalysis:
    """`competency-estimator`: fit a PaRCE estimator for the classifier on a labelled dataset and store it."""

    def __init__(self, classifier: Any, store: Any = None, config: EstimatorConfig | None = None, *,
                 work_dir: str | os.PathLike | None = None) -> None:
        from .fit import CompetencyEstimatorFit

        self.fit = CompetencyEstimatorFit(classifier, config, store=store, work_dir=work_dir)

    @property
    def estimator(self) -> FittedEstimator | None:
        """The fitted estimator after a successful call."""
        return self.fit.estimator

    def __call__(self, dataset: Any, ctx: JobContext | None = None) -> EstimatorFitResult:
        """`dataset`: a labelled dataset (core.data) or the path of a class-folder tree or CSV manifest."""
        if isinstance(dataset, (str, os.PathLike)):
            from ...data.datasets import open_dataset

            dataset = open_dataset(dataset)
        return self.fit.fit_dataset(dataset, ctx)


class CompetencyCounterfactualAnalysis:
    """`competency-cf`: why is the classifier not competent on this image? Competency and its parts, a
    high-competency counterfactual from each generator, and the MLLM's explanation with and without it."""

    def __init__(self, classifier: Any, fitted: Any, mllm: Any = None, store: Any = None,
                 config: CounterfactualConfig | None = None) -> None:
        from .counterfactual import CompetencyCounterfactual

        estimator = resolve_estimator(fitted, classifier, store)
        self.pipeline = CompetencyCounterfactual(estimator, mllm, config, store=store)

    def __call__(self, image: Any, ctx: JobContext | None = None) -> CompetencyCounterfactualResult:
        return self.pipeline(image, ctx)


ESTIMATOR_SPEC = AnalysisSpec(
    name=ESTIMATOR_ANALYSIS, kind="fit", version=ESTIMATOR_VERSION, factory=CompetencyEstimatorAnalysis,
    config=EstimatorConfig, result=EstimatorFitResult, inputs=Inputs(classifier="required", data="dataset"),
    description="Fit a competency estimator (PaRCE: confidence x probability of being in-distribution, from an "
                "autoencoder's reconstruction loss calibrated on held-out images) for a classifier.")

SCORE_SPEC = AnalysisSpec(
    name=SCORE_ANALYSIS, kind="dataset", version=SCORE_VERSION, factory=CompetencyScoreAnalysis,
    config=CompetencyScoreConfig, result=CompetencyScoreSet,
    inputs=Inputs(classifier="required", fitted=ESTIMATOR_ANALYSIS, data="dataset"),
    description="Competency of every image of a set, and whether low competency comes from an unsure classifier "
                "or unfamiliar images; with labels, accuracy of the low- and high-competency images.")

BENCH_SPEC = AnalysisSpec(
    name=BENCH_ANALYSIS, kind="dataset", version=BENCH_VERSION,
    factory="nemo_desktop.core.analyses.competency.bench:CompetencyBenchAnalysis",
    config=CompetencyBenchConfig, result=CompetencyBenchResult,
    inputs=Inputs(classifier="required", fitted=ESTIMATOR_ANALYSIS, data="dataset"), extras=("competency",),
    description="The competency paper's Tables 1/2 on your images: every counterfactual generator over the set's "
                "low-competency images (success rate, LPIPS, feature/latent similarity, FD, KD, seconds).")

COUNTERFACTUAL_SPEC = AnalysisSpec(
    name=COUNTERFACTUAL_ANALYSIS, kind="sample", version=COUNTERFACTUAL_VERSION,
    factory=CompetencyCounterfactualAnalysis, config=CounterfactualConfig, result=CompetencyCounterfactualResult,
    inputs=Inputs(classifier="required", mllm="optional", fitted=ESTIMATOR_ANALYSIS, data="image"),
    description="Why is the classifier not competent on this image: competency and its parts, high-competency "
                "counterfactuals (IGD, FGD, Reco, LGD, LNN) and the MLLM's explanation with and without them.")

# The module's registry entries, named by its entry point (pyproject.toml, nemo_desktop.analyses).
ANALYSES = (ESTIMATOR_SPEC, SCORE_SPEC, BENCH_SPEC, COUNTERFACTUAL_SPEC)
