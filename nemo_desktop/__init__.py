"""NEMO Desktop: explain and test why a vision classifier got an image wrong.

As a library (`import nemo_desktop as nemo`): the functions of `nemo_desktop.api` are available here, imported
on first use so that `import nemo_desktop` stays light: `nemo.load_model`, `nemo.predict`, `nemo.explain`,
`nemo.run_analysis`, `nemo.get_result`, `nemo.export_report`, `nemo.list_models`, `nemo.methods`,
`nemo.analyses`. See `help(nemo_desktop.api)`. (`__init__.pyi` gives type checkers the same names; their one list is
`nemo_desktop.api.__all__`; no import here names the API, so the core, which imports this package for
`__version__`, stays below it.)
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

def _api_names() -> list[str]:
    """The API's public names: `nemo_desktop.api.__all__`, the one list of them (imported on first use)."""
    import importlib

    return list(importlib.import_module(f"{__name__}.api").__all__)


def __getattr__(name: str) -> Any:
    if name == "api":
        import importlib

        return importlib.import_module(f"{__name__}.api")
    if name == "__all__":
        return ["__version__", *_api_names()]
    if not name.startswith("_") and name in _api_names():
        import importlib

        # by name, not `from . import api`: the core imports this package (__version__) and must stay below the API
        return getattr(importlib.import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module 'nemo_desktop' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_api_names()])
