"""Locate the data files shipped inside the package, in `nemo_desktop/resources/` (prompts, vocabularies, catalog,
error corpus, benchmark configs), read through `importlib.resources` so an installed wheel finds them as a
checkout does.

`NEMO_RESOURCES=DIR` replaces the whole folder (a user's edited prompts or catalog; it must have the same layout).
"""
from __future__ import annotations

import atexit
import os
from contextlib import ExitStack
from functools import lru_cache
from importlib import resources as _ilr
from pathlib import Path

from .errors import ConfigError

PACKAGE = "nemo_desktop"
FOLDER = "resources"

# The files the program reads at run time: `nemo doctor` checks each is present and readable.
REQUIRED = (
    ("catalog.json",),
    ("prompts",),
    ("vocab", "imagenet1k_classes.tsv"),
    ("error_corpus", "error_corpus.v1.json"),
    ("benchmarks", "criteria.json"),
    ("benchmarks", "configs"),
    ("icons", "nemo-desktop.svg"),
)


@lru_cache(maxsize=1)
def _packaged_root() -> Path:
    """The package's resources folder as a real path (extracted to a temporary folder if the package is zipped;
    cleaned up at exit)."""
    stack = ExitStack()
    atexit.register(stack.close)
    return Path(stack.enter_context(_ilr.as_file(_ilr.files(PACKAGE) / FOLDER)))


def resources_root() -> Path:
    """`NEMO_RESOURCES` if set, else the package's own `resources/` folder."""
    env = os.environ.get("NEMO_RESOURCES")
    root = Path(env).expanduser() if env else _packaged_root()
    if not root.is_dir():
        if env:
            raise ConfigError(f"NEMO_RESOURCES points to {root}, which is not a folder.",
                              hint="Unset NEMO_RESOURCES to use the shipped files, or point it to a copy of "
                                   "nemo_desktop/resources/.")
        raise ConfigError(f"The resources folder is missing: {root}",
                          hint="Reinstall NEMO Desktop (pip install --force-reinstall nemo-desktop).")
    return root


def resource_path(*parts: str) -> Path:
    p = resources_root().joinpath(*parts)
    if not p.exists():
        raise ConfigError(f"A shipped resource is missing: {p}",
                          hint="Reinstall NEMO Desktop" + (", or add the file to your NEMO_RESOURCES copy."
                                                          if os.environ.get("NEMO_RESOURCES") else "."))
    return p


def check_resources() -> list[dict]:
    """One row per required resource: its path and whether it is present and readable (for `nemo doctor`)."""
    rows = []
    try:
        root = resources_root()
    except ConfigError as exc:
        return [{"resource": FOLDER, "path": None, "ok": False, "problem": exc.message}]
    for parts in REQUIRED:
        p = root.joinpath(*parts)
        rows.append({"resource": "/".join(parts), "path": str(p), "ok": False, "problem": None})
        try:
            if p.is_dir():
                children = [c for c in p.iterdir() if c.is_file()]
                if not children:
                    raise OSError("the folder is empty")
                for c in children:
                    c.open("rb").close()
            elif p.is_file():
                p.open("rb").close()
            else:
                raise OSError("not found")
        except OSError as exc:
            rows[-1]["problem"] = exc.strerror or str(exc)
            continue
        rows[-1]["ok"] = True
    return rows
