"""Competency estimation (PaRCE) and high-competency counterfactuals (Pohland & Tomlin), Qt-free core."""
from __future__ import annotations

from .config import GENERATORS, CounterfactualConfig, EstimatorConfig
from .estimator import FittedEstimator
from .fit import CompetencyEstimatorFit
from .results import (CompetencyBenchResult, CompetencyCounterfactualResult, CompetencyScore, CounterfactualOutput,
                      EstimatorFitResult, GeneratorMetrics)

__all__ = ["GENERATORS", "CompetencyBenchResult", "CompetencyCounterfactualResult", "CompetencyEstimatorFit",
           "CompetencyScore", "CounterfactualConfig", "CounterfactualOutput", "EstimatorConfig", "EstimatorFitResult",
           "FittedEstimator", "GeneratorMetrics"]

from .counterfactual import CompetencyCounterfactual  # noqa: E402
from .lpips_distance import LpipsDistance, MetricUnavailable, load_lpips  # noqa: E402

__all__ += ["CompetencyCounterfactual", "LpipsDistance", "MetricUnavailable", "load_lpips"]
from .bench import CompetencyBench  # noqa: E402
from .causes import CAUSES, find_low_competency, modify  # noqa: E402

__all__ += ["CAUSES", "CompetencyBench", "find_low_competency", "modify"]
