"""Plugins: model families and analyses from other installed distributions, through entry points.

A distribution adds to NEMO Desktop by declaring entry points in its `pyproject.toml`:

    [project.entry-points."nemo_desktop.model_families"]
    my-family = "my_package.nemo_family"          # a module that calls @register_family(...) on import
    [project.entry-points."nemo_desktop.analyses"]
    my-method = "my_package.nemo_method:ANALYSES"  # registry entries: an AnalysisSpec or a tuple/list of them

The registries load them on first use (`core.models.families.list_families`/`get_loader`,
`core.registry.list_analyses`/`get_analysis`), so every surface that reads a registry sees them: the CLI, the
app, the MCP server, the Python API and the benchmark's Ray workers (which read the registries in their own
process). A plugin that fails to load (an import error, a name already taken, an object of the wrong type) is
logged with its name and skipped; `plugin_problems()` lists it (`nemo models list` warns about each,
`nemo doctor` lists every plugin, the MCP server's list_models and `nemo_desktop.api.list_plugins()` return
them). Nothing a plugin does can stop NEMO Desktop from starting.

NEMO Desktop's own analyses come through the same group: its distribution declares them as entry points (with a
fallback list for a checkout without installed metadata, core/registry/registry.py), loaded before any plugin's and
not listed as plugins. An analysis entry point naming a function that returns the entries is the older shape: it
still loads, with a deprecation warning (`Plugin.note`).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable

log = logging.getLogger(__name__)

FAMILIES_GROUP = "nemo_desktop.model_families"
ANALYSES_GROUP = "nemo_desktop.analyses"
GROUPS = (FAMILIES_GROUP, ANALYSES_GROUP)


@dataclass(frozen=True)
class Plugin:
    """One entry point: its group, name, target ("module:attr") and the distribution that declared it."""

    group: str
    name: str
    value: str
    dist: str | None
    error: str | None = None  # why it was skipped; None when it loaded
    registered: tuple[str, ...] = ()  # what it added: family keys "kind:name" or analysis names
    note: str | None = None  # e.g. a deprecated registration shape, said where the plugin is listed

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "name": self.name, "value": self.value, "distribution": self.dist,
                "ok": self.ok, "error": self.error, "registered": list(self.registered)} | (
            {"note": self.note} if self.note else {})

    def describe(self) -> str:
        where = f" (from {self.dist})" if self.dist else ""
        return f"plugin '{self.name}'{where} in {self.group}"


_lock = threading.RLock()
_loaded: dict[str, list[Plugin]] = {}
_loading: set[str] = set()


_all_entry_points: Any = None  # one scan of the installed distributions per process (~20 ms), for both groups


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    global _all_entry_points
    try:
        if _all_entry_points is None:
            _all_entry_points = metadata.entry_points()
        eps = list(_all_entry_points.select(group=group))
    except Exception as exc:  # noqa: BLE001 - a broken distribution's metadata must not stop the app
        log.warning("Could not list the %s plugins: %r", group, exc)
        return []
    seen: dict[str, metadata.EntryPoint] = {}
    for ep in eps:  # the same distribution found twice on sys.path: keep the first, as importlib does
        seen.setdefault(ep.name, ep)
    return sorted(seen.values(), key=lambda e: e.name)


def _dist_name(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    try:
        return dist.metadata["Name"] if dist is not None else None
    except Exception:  # noqa: BLE001
        return None


@dataclass(frozen=True)
class Registrar:
    """How one registry takes its plugins: `load(obj)` registers what an entry point's object gives, `names()`
    lists what the registry holds, `forget(names)` removes entries (a half-registered plugin, or tests). The
    registries pass their own (core/models/families.py, core/registry/registry.py): this module imports neither,
    so it sits below both in the core's layers."""

    load: Callable[[Any], None]
    names: Callable[[], set[str]]
    forget: Callable[[set[str]], None]


_registrars: dict[str, Registrar] = {}


OWN_DISTRIBUTION = "nemo-desktop"
DEPRECATED_FUNCTION = ("an entry point naming a function that returns the analyses is deprecated and will stop "
                       "working in a later release: name the AnalysisSpec, or a tuple of them, instead")


def _own(ep: metadata.EntryPoint) -> bool:
    return _dist_name(ep) == OWN_DISTRIBUTION


def load_plugins(group: str, registrar: Registrar, builtin: dict[str, str] | None = None) -> list[Plugin]:
    """Load the group's entry points into a registry, once per process (later calls return what the first
    found). Called by the registries on first use. `builtin`: NEMO Desktop's own entry points of the group
    (name -> "module:attr", as its pyproject.toml declares them), loaded first as entry points too. They are read
    from the code, not from the installed metadata, which is stale in an editable install whose pyproject changed
    and absent from a checkout on PYTHONPATH; a built-in that fails to load is an error, not a skipped plugin."""
    if group not in GROUPS:
        raise ValueError(f"unknown plugin group {group!r}")
    with _lock:
        if group in _loaded or group in _loading:  # loaded, or a plugin's import asked the registry again
            return list(_loaded.get(group, []))
        _registrars[group] = registrar
        _loading.add(group)
        try:
            for name, value in (builtin or {}).items():
                registrar.load(metadata.EntryPoint(name, value, group).load())
            out = []
            for ep in _entry_points(group):
                if builtin is not None and _own(ep):  # the built-ins, loaded above
                    continue
                before = registrar.names()
                note = None
                try:
                    obj = ep.load()
                    if group == ANALYSES_GROUP and callable(obj):  # a function returning the entries: deprecated
                        note = DEPRECATED_FUNCTION
                        log.warning("Plugin '%s' (%s): %s.", ep.name, ep.value, note)
                        obj = obj()
                    registrar.load(obj)
                    out.append(Plugin(group, ep.name, ep.value, _dist_name(ep),
                                      registered=tuple(sorted(registrar.names() - before)), note=note))
                except Exception as exc:  # noqa: BLE001 - a broken plugin is reported and skipped, never fatal
                    registrar.forget(registrar.names() - before)  # a half-registered plugin is not loaded
                    plugin = Plugin(group, ep.name, ep.value, _dist_name(ep),
                                    error=f"{type(exc).__name__}: {exc}")
                    log.warning("Skipped %s: %s", plugin.describe(), plugin.error)
                    out.append(plugin)
            _loaded[group] = out
            return list(out)
        finally:
            _loading.discard(group)


def list_plugins() -> list[Plugin]:
    """Every plugin the registries have loaded so far, loaded or skipped. The registries load their group on
    first use: call `list_families()` and `list_analyses()` first for the complete list (`nemo_desktop.api.
    list_plugins` does)."""
    return [p for g in GROUPS for p in _loaded.get(g, [])]


def plugin_problems() -> list[Plugin]:
    """The plugins that were skipped, each with why."""
    return [p for p in list_plugins() if not p.ok]


def plugin_of(group: str, registered: str) -> Plugin | None:
    """The plugin that registered `registered` ("kind:family" or an analysis name), or None (built in)."""
    return next((p for p in _loaded.get(group, []) if registered in p.registered), None)


def _reset_for_tests() -> None:
    """Forget what was loaded (and unregister it), so a test can load a different set of plugins."""
    global _all_entry_points
    with _lock:
        _all_entry_points = None
        for group, plugins in list(_loaded.items()):
            registrar = _registrars.get(group)
            if registrar is not None:
                registrar.forget({n for p in plugins for n in p.registered})
        _loaded.clear()


__all__ = ["ANALYSES_GROUP", "FAMILIES_GROUP", "Plugin", "Registrar", "list_plugins", "load_plugins", "plugin_of",
           "plugin_problems"]
