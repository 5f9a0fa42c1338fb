"""Competency estimation (PaRCE) and high-competency counterfactuals (Pohland & Tomlin), Qt-free core.

The names below are imported on first use (PEP 562): listing the analysis registry imports this package, and the
estimator, generators and metrics pull in torch and scipy, which only running an analysis needs.
"""
from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "GENERATORS": "config", "CounterfactualConfig": "config", "EstimatorConfig": "config",
    "FittedEstimator": "estimator", "CompetencyEstimatorFit": "fit",
    "CompetencyBenchResult": "results", "CompetencyCounterfactualResult": "results", "CompetencyScore": "results",
    "CounterfactualOutput": "results", "EstimatorFitResult": "results", "GeneratorMetrics": "results",
    "CompetencyCounterfactual": "counterfactual",
    "LpipsDistance": "lpips_distance", "MetricUnavailable": "lpips_distance", "load_lpips": "lpips_distance",
    "CompetencyBench": "bench",
    "CAUSES": "causes", "find_low_competency": "causes", "modify": "causes",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
