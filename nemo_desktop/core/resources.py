"""Locate the data files shipped inside the package, in `nemo_desktop/resources/` (prompts, vocabularies, catalog,
error corpus, benchmark configs), through `importlib.resources`, so an installed wheel finds them as a checkout does.

`NEMO_RESOURCES=DIR` replaces the whole folder (a user's edited prompts or catalog, in the same layout).
"""
from __future__ import annotations

import os
from importlib import resources as _ilr
from pathlib import Path

from .errors import ConfigError


def resources_root() -> Path:
    """`NEMO_RESOURCES` if set, else the package's own `resources/` folder."""
    env = os.environ.get("NEMO_RESOURCES")
    # Wheels install unzipped, so the package's folder is a real directory.
    root = Path(env).expanduser() if env else Path(str(_ilr.files("nemo_desktop") / "resources"))
    if not root.is_dir():
        raise ConfigError(f"The resources folder is missing: {root}",
                          hint="Point NEMO_RESOURCES to a copy of nemo_desktop/resources/." if env
                          else "Reinstall NEMO Desktop (pip install --force-reinstall nemo-desktop).")
    return root


def resource_path(*parts: str) -> Path:
    p = resources_root().joinpath(*parts)
    if not p.exists():
        raise ConfigError(f"A shipped resource is missing: {p}", hint="Reinstall NEMO Desktop.")
    return p
