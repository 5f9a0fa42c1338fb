"""Per-sample explanation methods: the `sample` kind of the analysis registry (core/registry).

    @method_entry("scitx", config=SciTXConfig, version="1",
                  inputs=Inputs(mllm="required", editor="interventions", reference="optional"))
    class SciTXPipeline: ...

    ANALYSES = (SciTXPipeline.ENTRY,)                     # what the module's entry point names

    spec = get_method("scitx")                            # an AnalysisSpec of kind "sample"
    method = build_analysis(spec, Components(classifier=clf, mllm=mllm, editor=editor, store=store), {"k": 3})
    result = method(image, true_label, ctx)               # -> ExplanationResult

Every factory takes (classifier, mllm, editor=None, store=None, reference=None, config=None, ...) and returns a
callable (image, true_label, ctx=None) -> ExplanationResult.
"""
from __future__ import annotations

from typing import Callable

from nemo_desktop.core.registry import AnalysisSpec, Inputs, get_analysis, list_analyses
from nemo_desktop.core.base.records import ExplanationResult


def method_entry(name: str, *, config: type | None, inputs: Inputs, version: str, description: str = "",
                 default_components: Callable | None = None) -> Callable:
    """Declare a per-sample method's registry entry (kind 'sample', data 'image') with one decorator line: it is
    `factory.ENTRY`, which the module lists in its `ANALYSES` for its entry point (core/registry/registry.py)."""

    def deco(factory: Callable) -> Callable:
        text = description or (factory.__doc__ or "").strip().split("\n")[0]
        factory.ENTRY = AnalysisSpec(name=name, kind="sample", version=version, factory=factory, config=config,
                                     result=ExplanationResult, inputs=inputs, description=text,
                                     default_components=default_components)
        return factory

    return deco


def list_methods() -> list[str]:
    """The explanation methods: per-sample analyses called as (image, true_label, ctx) -> ExplanationResult.
    Other per-sample analyses (competency-cf, which needs a fitted estimator) have their own commands."""
    return [n for n in list_analyses("sample") if get_analysis(n).result is ExplanationResult]


def get_method(name: str) -> AnalysisSpec:
    return get_analysis(name, kind="sample")
