"""Analyses by name, timm-style: `get_analysis(name)`, `list_analyses(kind=...)`.

Every analysis, built-in or a plugin's, comes through ONE shape: an entry point in the group `nemo_desktop.analyses`
that names registry entries, an `AnalysisSpec` or a tuple/list of them (core/base/plugins.py loads them on first use):

    [project.entry-points."nemo_desktop.analyses"]
    my-method = "my_package.nemo_method:ANALYSES"     # ANALYSES = (AnalysisSpec(...), ...) or one AnalysisSpec

NEMO Desktop's own analyses are the entry points of its own distribution (pyproject.toml), loaded first so that a
plugin cannot take a built-in name. `BUILTIN_ENTRY_POINTS` repeats them for a checkout imported without installed
metadata (PYTHONPATH, a source tree); tests/core/test_plugins.py checks that the two agree. A new built-in analysis
defines its entry in its module (`SPEC = AnalysisSpec(...)`, or `@method_entry` for a per-sample method) and adds
one line to both. `register_analysis(spec)` still adds an entry at run time (scripts, tests).
"""
from __future__ import annotations

from ..base.errors import ConfigError
from .spec import KINDS, AnalysisSpec

BUILTIN_ENTRY_POINTS: dict[str, str] = {
    "scitx": "nemo_desktop.core.methods.scitx:ANALYSES",
    "error-retrieval": "nemo_desktop.core.methods.error_retrieval:ANALYSES",
    "cam-mllm": "nemo_desktop.core.methods.cam_mllm:ANALYSES",
    "change-mllm": "nemo_desktop.core.methods.change_mllm:ANALYSES",
    "global-explanation": "nemo_desktop.core.analyses.global_explanation:SPEC",
    "competency": "nemo_desktop.core.analyses.competency.analyses:ANALYSES",
    "failure-modes": "nemo_desktop.core.analyses.failure_modes.analysis:SPEC",
    "model-diff": "nemo_desktop.core.analyses.model_diff.analysis:SPEC",
    "fix": "nemo_desktop.core.analyses.fix.pipeline:SPEC",
}
BUILTIN_MODULES: tuple[str, ...] = tuple(dict.fromkeys(v.partition(":")[0] for v in BUILTIN_ENTRY_POINTS.values()))

_SPECS: dict[str, AnalysisSpec] = {}


def register_analysis(spec: AnalysisSpec) -> AnalysisSpec:
    old = _SPECS.get(spec.name)
    if old is not None and old.factory != spec.factory:  # identity; a LazyFactory compares by its path
        # FiftyOne's register_run refuses a key reused by a different run; a name is the same promise.
        raise ValueError(f"An analysis named '{spec.name}' is already registered ({old.factory!r}).")
    _SPECS[spec.name] = spec
    return spec


def _ensure_builtin() -> None:
    """The built-in entries, then the plugins' (core/base/plugins.py), once per process (a dictionary look-up after the
    first call): a broken plugin is logged by name and skipped; a broken built-in is an error."""
    from ..base.plugins import ANALYSES_GROUP, load_plugins

    load_plugins(ANALYSES_GROUP, _plugin_registrar(), builtin=BUILTIN_ENTRY_POINTS)


def registry_entries(obj) -> list[AnalysisSpec]:
    """The entries an entry point's object names: an AnalysisSpec, or a tuple/list of them. A function returning
    them is the older shape (documented until 0.x), still taken with a deprecation warning by the loader."""
    specs = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    for spec in specs:
        if not isinstance(spec, AnalysisSpec):
            raise TypeError(f"an entry point of nemo_desktop.analyses names an AnalysisSpec or a tuple of them, "
                            f"not {type(spec).__name__}")
    return specs


def _plugin_registrar():
    from ..base.plugins import Registrar

    def load(obj) -> None:
        for spec in registry_entries(obj):
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
