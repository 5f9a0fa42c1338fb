"""Analyses by name, timm-style: `register_analysis(spec)` in the analysis' module, `get_analysis(name)`,
`list_analyses(kind=...)`. The built-in modules are imported on first use; a new analysis adds its module to
BUILTIN_MODULES and one `register_analysis(...)` line (or `@register_method` for a per-sample method). Analyses
of other distributions come through the `nemo_desktop.analyses` entry-point group (core/base/plugins.py)."""
from __future__ import annotations

import importlib

from ..base.errors import ConfigError
from .spec import KINDS, AnalysisSpec

BUILTIN_MODULES: tuple[str, ...] = (
    "nemo_desktop.core.methods.scitx", "nemo_desktop.core.methods.error_retrieval",
    "nemo_desktop.core.methods.cam_mllm", "nemo_desktop.core.methods.change_mllm",
    "nemo_desktop.core.analyses.global_explanation", "nemo_desktop.core.analyses.competency.analyses",
    "nemo_desktop.core.analyses.failure_modes.analysis",
    "nemo_desktop.core.analyses.model_diff.analysis", "nemo_desktop.core.analyses.fix.pipeline",
)

_SPECS: dict[str, AnalysisSpec] = {}
_loaded = False


def register_analysis(spec: AnalysisSpec) -> AnalysisSpec:
    old = _SPECS.get(spec.name)
    if old is not None and old.factory != spec.factory:  # identity; a LazyFactory compares by its path
        # FiftyOne's register_run refuses a key reused by a different run; a name is the same promise.
        raise ValueError(f"An analysis named '{spec.name}' is already registered ({old.factory!r}).")
    _SPECS[spec.name] = spec
    return spec


def _ensure_builtin() -> None:
    global _loaded
    if not _loaded:
        for mod in BUILTIN_MODULES:
            importlib.import_module(mod)
        _loaded = True
    # Then the plugins' analyses (entry-point group `nemo_desktop.analyses`, core/base/plugins.py), once per process
    # (a dictionary look-up after the first call): a broken one is logged by name and skipped.
    from ..base.plugins import ANALYSES_GROUP, load_plugins

    load_plugins(ANALYSES_GROUP, _plugin_registrar())


def _plugin_registrar():
    """How analysis plugins register: an AnalysisSpec, a list of them, a function returning one or a list (or
    registering them itself and returning None), or a module whose import registered its analyses."""
    import types

    from ..base.plugins import Registrar

    def load(obj) -> None:
        if isinstance(obj, types.ModuleType):
            return
        if callable(obj) and not isinstance(obj, AnalysisSpec):
            obj = obj()
            if obj is None:
                return
        specs = list(obj) if isinstance(obj, (list, tuple)) else [obj]
        for spec in specs:
            if not isinstance(spec, AnalysisSpec):
                raise TypeError(f"expected an AnalysisSpec, got {type(spec).__name__}")
        for spec in specs:
            register_analysis(spec)

    def forget(names: set[str]) -> None:
        for name in names:
            _SPECS.pop(name, None)

    return Registrar(load, lambda: set(_SPECS), forget)


def list_analyses(kind: str | None = None) -> list[str]:
    _ensure_builtin()
    if kind is not None and kind not in KINDS:
        raise ConfigError(f"Unknown analysis kind '{kind}'.", hint=f"Kinds: {', '.join(KINDS)}.")
    return sorted(n for n, s in _SPECS.items() if kind is None or s.kind == kind)


def get_analysis(name: str, kind: str | None = None) -> AnalysisSpec:
    _ensure_builtin()
    spec = _SPECS.get(name)
    if spec is None or (kind is not None and spec.kind != kind):
        what = f"{kind} analysis" if kind == "dataset" or kind == "model" else \
            "explanation method" if kind == "sample" else "analysis"
        raise ConfigError(f"Unknown {what} '{name}'.",
                          hint=f"Known: {', '.join(list_analyses(kind)) or 'none'}.")
    return spec
