"""Locate the data files the program reads at run time (prompts, vocabularies, catalog, error corpus, benchmark
configs, the desktop entry and icons) through `importlib.resources`, so an installed wheel finds them as a checkout
does.

Where they live:
- an installed copy (wheel, sdist install): `resources/`, one folder inside the package. setup.py maps
  the repository's top-level `resources/` there, and `packaging/desktop/` and `packaging/icons/` into its `desktop/`
  and `icons/` sub-folders;
- a checkout (PYTHONPATH or an editable install): the repository's `resources/`, with `desktop/` and `icons/` read
  from `packaging/` (what makes the installable desktop application lives there, see packaging/README.md).

`NEMO_RESOURCES=DIR` replaces the whole folder (a user's edited prompts or catalog, in the installed layout: a copy
of an installed `resources/`).
"""
from __future__ import annotations

import os
from importlib import resources as _ilr
from pathlib import Path

from nemo_desktop.core.base.errors import ConfigError

# Sub-folders a checkout keeps in packaging/ rather than resources/ (the wheel puts them in one folder).
PACKAGING_FOLDERS = ("desktop", "icons")


def _checkout() -> Path | None:
    """The repository root when this package runs from a checkout with a top-level resources/ folder."""
    root = Path(__file__).resolve().parents[3]  # nemo_desktop/core/base/resources.py -> the checkout
    return root if (root / "resources").is_dir() and (root / "pyproject.toml").is_file() else None


def shipped_root() -> Path:
    """The folder the package itself ships (ignoring NEMO_RESOURCES): the installed package's `resources/`, else
    the checkout's top-level `resources/`."""
    # Wheels install unzipped, so the package's folder is a real directory.
    installed = Path(str(_ilr.files("nemo_desktop") / "resources"))
    if installed.is_dir():
        return installed
    checkout = _checkout()
    return checkout / "resources" if checkout else installed


def resources_root() -> Path:
    """`NEMO_RESOURCES` if set, else the shipped folder (see the module's docstring)."""
    env = os.environ.get("NEMO_RESOURCES")
    root = Path(env).expanduser() if env else shipped_root()
    if not root.is_dir():
        raise ConfigError(f"The resources folder is missing: {root}",
                          hint="Point NEMO_RESOURCES to a copy of an installed resources/." if env
                          else "Reinstall NEMO Desktop (pip install --force-reinstall nemo-desktop).")
    return root


def resource_file(*parts: str, root: Path | None = None) -> Path:
    """Where a resource is expected (it may be missing): under `root` (default: resources_root()), except the
    desktop entry and icons of a checkout, which are in packaging/."""
    root = resources_root() if root is None else root
    checkout = _checkout()
    if parts and parts[0] in PACKAGING_FOLDERS and checkout and root == checkout / "resources":
        return checkout.joinpath("packaging", *parts)
    return root.joinpath(*parts)


def resource_path(*parts: str) -> Path:
    p = resource_file(*parts)
    if not p.exists():
        raise ConfigError(f"A shipped resource is missing: {p}", hint="Reinstall NEMO Desktop.")
    return p
