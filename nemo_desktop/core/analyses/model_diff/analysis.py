"""The `model-diff` registry entry (kind "model"): how do two classifiers differ, in words?

    analysis = build_analysis("model-diff", Components(classifier=a, classifier_b=b, mllm=llm,
                                                       generator=source, judge=evaluator, store=store), options)
    result = analysis(ctx)                 # ModelDiffResult

Roles: `classifier` is model A, `classifier_b` model B, `mllm` the explainer LLM (text-only LLMs and MLLMs
alike: only `chat` is used), `judge` the evaluator LLM (default: the explainer), `generator` the condition
source (sources.py).
"""
from __future__ import annotations

from typing import Any

from ...registry import AnalysisSpec, Inputs
from .config import ModelDiffConfig
from .pipeline import ANALYSIS, VERSION, ModelDiffPipeline
from .result import ModelDiffResult


def build_model_diff(classifier: Any, classifier_b: Any, mllm: Any, generator: Any, judge: Any = None, *,
                     store: Any = None, config: ModelDiffConfig | None = None) -> ModelDiffPipeline:
    return ModelDiffPipeline(classifier, classifier_b, generator, mllm, judge, config=config, store=store)


# The module's registry entry, named by its entry point (pyproject.toml, nemo_desktop.analyses).
SPEC = AnalysisSpec(
    name=ANALYSIS, kind="model", version=VERSION, factory=build_model_diff, config=ModelDiffConfig,
    result=ModelDiffResult,
    inputs=Inputs(classifier="required", classifier_b="required", mllm="required", generator="required",
                  judge="optional", data="conditions"),
    description="Explains in words how two classifiers with the same labels differ, from their accuracy "
                "differences under controlled conditions (seed 002: Raw Differences, Summarization, "
                "Optimization; scored by Completeness, Density and Token Length).")
