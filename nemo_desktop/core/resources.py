"""Locate files shipped in the top-level `resources/` folder (prompts, vocabularies, catalog, corpus)."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError


def resources_root() -> Path:
    """`NEMO_RESOURCES` if set, else the `resources/` folder next to the package (checkout or sdist)."""
    env = os.environ.get("NEMO_RESOURCES")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / "resources"
    if not root.is_dir():
        raise ConfigError(f"The resources folder is missing: {root}",
                          hint="Reinstall NEMO Desktop from a complete checkout, or set NEMO_RESOURCES.")
    return root


def resource_path(*parts: str) -> Path:
    p = resources_root().joinpath(*parts)
    if not p.exists():
        raise ConfigError(f"A shipped resource is missing: {p}", hint="Reinstall NEMO Desktop.")
    return p
