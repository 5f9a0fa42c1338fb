"""Report sections by result kind (napari's table from a core type to its view): one builder per kind of analysis
result, so a report of any result, and a run report's dataset-level parts, come from here without special cases.

    @result_report("dataset", "failure-modes")     # or result_report("sample") for every per-sample method
    def failure_modes_report(result, store, ctx) -> ReportDocument: ...

    @run_section("Global explanation", "global")   # a section of every run report, when it has something
    def global_section(run: dict, store) -> list[Block] | None: ...

A new analysis adds its builders in its own module here and names the module in BUILTIN_SECTION_MODULES.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from ...base.errors import ConfigError
from ...base.job_context import JobContext

BUILTIN_SECTION_MODULES = ("nemo_desktop.core.reports.sections.sample",
                           "nemo_desktop.core.reports.sections.global_explanation",
                           "nemo_desktop.core.reports.sections.competency",
                           "nemo_desktop.core.reports.sections.failure_modes",
                           "nemo_desktop.core.reports.sections.model_diff",
                           "nemo_desktop.core.reports.sections.fix")

_REPORTS: dict[tuple[str, str | None], Callable[..., Any]] = {}
_RUN_SECTIONS: list[tuple[str, str, Callable[[dict, Any], Any]]] = []
_loaded = False


def result_report(kind: str, analysis: str | None = None) -> Callable:
    """Register the report builder of results of `kind` (and of one `analysis`, when given)."""

    def deco(fn: Callable) -> Callable:
        _REPORTS[(kind, analysis)] = fn
        return fn

    return deco


def run_section(title: str, anchor: str) -> Callable:
    """Register a section that run reports include when the builder returns blocks for the run."""

    def deco(fn: Callable) -> Callable:
        _RUN_SECTIONS.append((title, anchor, fn))
        return fn

    return deco


def _ensure() -> None:
    global _loaded
    if not _loaded:
        for mod in BUILTIN_SECTION_MODULES:
            importlib.import_module(mod)
        _loaded = True


def has_own_report(kind: str, analysis: str | None) -> bool:
    """Whether results of this analysis have a section of their own (e.g. competency-cf, a per-sample
    analysis that is not an explanation)."""
    _ensure()
    return analysis is not None and (kind, analysis) in _REPORTS


def report_builder(kind: str, analysis: str | None) -> Callable[..., Any]:
    _ensure()
    fn = _REPORTS.get((kind, analysis)) or _REPORTS.get((kind, None))
    if fn is None:
        raise ConfigError(f"There is no report for results of the analysis '{analysis}' (kind {kind}).",
                          hint="Export its JSON instead (--json).")
    return fn


def build_result_report(result: Any, store: Any, ctx: JobContext | None = None, **kw: Any) -> Any:
    """The report of any analysis result (an object following core/registry/results.AnalysisResult)."""
    return report_builder(getattr(result, "kind", "sample"), getattr(result, "analysis", None))(
        result, store, ctx=ctx, **kw)


def stored_result_report(stored: Any, store: Any, ctx: JobContext | None = None, **kw: Any) -> Any:
    """The report of a stored result whose payload names its kind and analysis and that analysis has its own
    builder (e.g. `nemo report KEY` of a competency result); None for the others (explanations)."""
    payload = getattr(stored, "payload", None) or {}
    kind, analysis = payload.get("kind"), payload.get("analysis")
    if not isinstance(kind, str) or not isinstance(analysis, str):
        return None
    _ensure()
    fn = _REPORTS.get((kind, analysis))
    if fn is None:
        return None
    from ...registry import get_analysis

    spec = get_analysis(analysis)
    if spec.result is None or not hasattr(spec.result, "from_dict"):
        return None
    result = spec.result.from_dict(payload)
    if hasattr(result, "result_key"):
        result.result_key = stored.key
    return fn(result, store, ctx=ctx, **kw)


def run_sections() -> list[tuple[str, str, Callable[[dict, Any], Any]]]:
    _ensure()
    return list(_RUN_SECTIONS)
