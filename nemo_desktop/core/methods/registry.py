"""Explanation methods by name, timm-style, so the CLI, the GUI and the benchmark runner pick one by name.

    @register_method("scitx", config=SciTXConfig, description="...")
    class SciTXPipeline: ...

    entry = get_method("scitx")
    method = entry.factory(classifier, mllm, editor=editor, store=store, reference=index,
                           config=entry.config(k=3))
    result = method(image, true_label, ctx)          # -> ExplanationResult

Every factory takes (classifier, mllm, editor=None, store=None, reference=None, config=None) and returns a
callable (image, true_label, ctx=None) -> ExplanationResult. Built-in methods are imported on first use.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConfigError

# Modules that register the built-in methods (baselines add theirs here).
_BUILTIN_MODULES = ("nemo_desktop.core.methods.scitx", "nemo_desktop.core.methods.error_retrieval",
                    "nemo_desktop.core.methods.cam_mllm", "nemo_desktop.core.methods.change_mllm")


@dataclass(frozen=True)
class MethodEntry:
    name: str
    factory: Callable[..., Any]
    config: type | None = None  # dataclass of the method's parameters
    description: str = ""
    needs_editor: bool = False  # True if image interventions need an ImageEditor (non-zero-shot classifiers)


_METHODS: dict[str, MethodEntry] = {}


def register_method(name: str, *, config: type | None = None, description: str = "",
                    needs_editor: bool = False) -> Callable:
    def deco(factory: Callable) -> Callable:
        _METHODS[name] = MethodEntry(name, factory, config, description or (factory.__doc__ or "").strip()
                                     .split("\n")[0], needs_editor)
        return factory

    return deco


def _ensure_builtin() -> None:
    for mod in _BUILTIN_MODULES:
        importlib.import_module(mod)


def list_methods() -> list[str]:
    _ensure_builtin()
    return sorted(_METHODS)


def get_method(name: str) -> MethodEntry:
    _ensure_builtin()
    try:
        return _METHODS[name]
    except KeyError:
        raise ConfigError(f"Unknown explanation method '{name}'.",
                          hint=f"Known methods: {', '.join(sorted(_METHODS)) or 'none'}.") from None
