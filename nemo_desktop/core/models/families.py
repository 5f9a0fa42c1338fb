"""timm-style registry: adapter families register a loader, the catalog names entries that use them.

    @register_family("classifier", "timm")
    def load_timm(spec: ModelSpec, options: LoadOptions) -> Classifier: ...

    model = load_model("vit-b16-augreg2")          # a catalog id
    model = load_model(ModelSpec(kind="classifier", family="timm", source="local-dir:/tmp/tiny"))

Tests loop over `list_families()` and `list_catalog()` so that every new family and catalog entry gets the
standard tests for free.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from nemo_desktop.core.base.errors import ConfigError

KINDS = ("classifier", "mllm", "editor", "generator")  # generator: text-to-image (model differences)


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to load one model. `source` is a Hub repo id, a local directory or a file."""

    kind: str  # one of KINDS
    family: str  # registry family name
    source: str
    revision: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # family-specific (e.g. num_classes, prompts)
    catalog_id: str | None = None

    @property
    def model_id(self) -> str:
        return self.catalog_id or f"{self.family}:{self.source}"


@dataclass
class LoadOptions:
    device: str = "auto"
    dtype: str = "auto"
    cpu_offload: bool = False
    trust_remote_code: bool = False  # off unless the user turns it on
    local_files_only: bool | None = None  # None = follow HF_HUB_OFFLINE
    cache_dir: str | None = None  # None = the user's standard Hugging Face cache


Loader = Callable[[ModelSpec, LoadOptions], Any]
_FAMILIES: dict[tuple[str, str], Loader] = {}


def register_family(kind: str, name: str) -> Callable[[Loader], Loader]:
    if kind not in KINDS:
        raise ValueError(f"unknown model kind {kind!r}")

    def deco(fn: Loader) -> Loader:
        _FAMILIES[(kind, name)] = fn
        return fn

    return deco


def _ensure_builtin_families() -> None:
    """Import the adapter modules (they register themselves), then the plugins' families (entry-point group
    `nemo_desktop.model_families`, core/base/plugins.py); cheap after the first call."""
    from nemo_desktop.core.models import adapters  # noqa: F401  (adapters/__init__ imports every family module)
    from nemo_desktop.core.base.plugins import FAMILIES_GROUP, load_plugins

    load_plugins(FAMILIES_GROUP, _plugin_registrar())


def _plugin_registrar():
    """How family plugins register: a module (its import ran @register_family) or a function that registers."""
    import types

    from nemo_desktop.core.base.plugins import Registrar

    def load(obj: Any) -> None:
        if isinstance(obj, types.ModuleType):
            return
        if callable(obj):
            obj()
            return
        raise TypeError(f"expected a module or a function that registers a model family, got {type(obj).__name__}")

    def forget(names: set[str]) -> None:
        for key in [k for k in _FAMILIES if f"{k[0]}:{k[1]}" in names]:
            del _FAMILIES[key]

    return Registrar(load, lambda: {f"{k}:{n}" for k, n in _FAMILIES}, forget)


def list_families(kind: str | None = None) -> list[tuple[str, str]]:
    _ensure_builtin_families()
    return sorted(k for k in _FAMILIES if kind is None or k[0] == kind)


def get_loader(kind: str, family: str) -> Loader:
    _ensure_builtin_families()
    try:
        return _FAMILIES[(kind, family)]
    except KeyError:
        known = ", ".join(f for k, f in sorted(_FAMILIES) if k == kind) or "none"
        raise ConfigError(f"Unknown {kind} family '{family}'.", hint=f"Known {kind} families: {known}.") from None


def load_model(spec_or_id: "ModelSpec | str", options: LoadOptions | None = None) -> Any:
    """Load a model from a ModelSpec or a catalog id through its family's loader."""
    if isinstance(spec_or_id, str):
        from nemo_desktop.core.models.catalog import get_entry

        spec = get_entry(spec_or_id).spec()
    else:
        spec = spec_or_id
    loader = get_loader(spec.kind, spec.family)
    from nemo_desktop.core.base.extras import require_for_family

    require_for_family(spec.family, f"The {spec.kind} {spec.model_id}")  # e.g. a diffusers editor: 'editing'
    return loader(spec, options or LoadOptions())
