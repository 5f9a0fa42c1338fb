"""Optional capabilities and the pip extras that enable them (pyproject.toml's [project.optional-dependencies]).

The core install predicts, explains with methods that need no image editor, indexes, judges and runs the benchmark;
what only one capability needs is an extra named by what it enables. `nemo doctor` lists them (`status()`), and
every command, the desktop app's method start and its report exporter check theirs before anything runs
(`require()`), naming the extra to install. Only `importlib.util.find_spec` is used: nothing is imported here.

The `gui` extra holds the desktop user's capabilities (`in_gui`); `all` holds every extra but those marked
`in_all=False` (fiftyone). The opt-in ones (fix, mcp, notebook, keyring, ray, fiftyone) are listed too, so that
`nemo doctor` shows every extra pyproject.toml declares.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from nemo_desktop.core.base.errors import ConfigError


@dataclass(frozen=True)
class Extra:
    name: str
    enables: str  # what it enables, in words (after "the '<name>' extra enables ...")
    modules: tuple[str, ...]  # import names checked with find_spec
    without: str  # what happens without it
    in_gui: bool = True  # part of the `gui` extra (a desktop user's capabilities); the others are opt-in
    # Part of the `all` extra. FiftyOne is not: it brings its own database server and app and pins versions of
    # common packages (starlette, python-dateutil) that other capabilities use newer.
    in_all: bool = True


EXTRAS: dict[str, Extra] = {e.name: e for e in (
    Extra("editing", "local image editors and text-to-image generators (diffusers): SciTX's and the other "
          "methods' counterfactual image edits, the generated conditions of model differences", ("diffusers",),
          "methods that edit images work only with a zero-shot classifier (they rewrite prompts instead)"),
    Extra("competency", "competency's FD/KD (torchmetrics, torch-fidelity) and LPIPS distances (lpips)",
          ("torchmetrics", "torch_fidelity", "lpips"),
          "`nemo competency bench` and `lpips` refuse to start; edit distances use 1 - SSIM instead of LPIPS"),
    Extra("pdf", "PDF reports (fpdf2, fonttools, uharfbuzz)", ("fpdf", "fontTools", "uharfbuzz"),
          "reports export as HTML only"),
    Extra("tokens", "exact o200k token lengths of model differences, offline (bpe-openai)", ("bpe_openai",),
          "token lengths use tiktoken if its vocabulary is cached, else approximate word counts"),
    Extra("quantize", "int8/int4 weights of a local multimodal LLM and int8/float8 weights of a DiT image editor "
          "(torchao): the '48 GB' and '24 GB' memory profiles", ("torchao",),
          "the MLLM and the editor load in bf16 and the smaller memory profiles refuse to start"),
    Extra("fix", "LoRA fixes (`nemo fix --mode lora`: peft's adapters on a classifier's backbone)", ("peft",),
          "`nemo fix --mode lora` refuses to start; the head, last-block and full modes work", in_gui=False),
    Extra("mcp", "the engine as Model Context Protocol tools for agents (`nemo mcp`: mcp, anyio, uvicorn)",
          ("mcp", "anyio", "uvicorn"), "`nemo mcp` refuses to start", in_gui=False),
    Extra("notebook", "Result.to_pandas() and notebook progress bars in the Python API (pandas, ipywidgets)",
          ("pandas", "ipywidgets"), "to_pandas() asks for pandas; progress bars in notebooks fall back to text bars",
          in_gui=False),
    Extra("keyring", "API keys kept in the system's keyring (keyring)", ("keyring",),
          "API keys are referenced by environment variable ('env:NAME'); a keyring reference is refused",
          in_gui=False),
    Extra("ray", "`nemo bench run --ray`: the benchmark's shards on a Ray cluster (ray)", ("ray",),
          "the benchmark runs its shards locally; --ray refuses to start", in_gui=False),
    Extra("parquet", "the per-image table as Parquet and as a pandas DataFrame with its typed schema (pyarrow)",
          ("pyarrow",), "`nemo export table` writes CSV and JSON Lines only"),
    Extra("fiftyone", "`nemo export fiftyone` and \"Open in FiftyOne\": NEMO's findings as a FiftyOne dataset, and a "
          "FiftyOne dataset as a source (fiftyone:NAME)", ("fiftyone",),
          "findings leave NEMO as reports and the per-image table only", in_gui=False, in_all=False),
)}

# Model families whose loaders need an extra (the family name's prefix).
FAMILY_PREFIXES = {"diffusers": "editing"}


class MissingExtraError(ConfigError):
    """A capability was asked for whose extra is not installed (refused before any work: exit 2)."""


def missing_modules(name: str) -> list[str]:
    out = []
    for module in EXTRAS[name].modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(module)
    return out


def available(name: str) -> bool:
    return not missing_modules(name)


def install_hint(name: str) -> str:
    return (f"Install it with `pip install 'nemo-desktop[{name}]'` (pipx: `pipx inject nemo-desktop "
            f"'nemo-desktop[{name}]'`; a checkout: `pip install -e '.[{name}]'`). `nemo doctor` lists every extra.")


def require(name: str, what: str) -> None:
    """Raise MissingExtraError ('<what> needs the '<name>' extra ...') unless the extra is installed."""
    missing = missing_modules(name)
    if missing:
        raise MissingExtraError(f"{what} needs the '{name}' extra, which is not installed (missing: "
                                f"{', '.join(missing)}).", hint=install_hint(name))


def extra_for_family(family: str) -> str | None:
    return next((extra for prefix, extra in FAMILY_PREFIXES.items() if family.startswith(prefix)), None)


def require_for_family(family: str, what: str) -> None:
    extra = extra_for_family(family)
    if extra:
        require(extra, what)


def require_for_spec(spec) -> None:
    """The extras an analysis declares (AnalysisSpec.extras)."""
    for name in getattr(spec, "extras", ()):
        require(name, f"The analysis {spec.name}")


def status() -> list[dict]:
    """One row per extra, for `nemo doctor` and the app."""
    rows = []
    for e in EXTRAS.values():
        missing = missing_modules(e.name)
        rows.append({"extra": e.name, "installed": not missing, "missing": missing, "enables": e.enables,
                     "without": e.without, "in_gui": e.in_gui,
                     "install": f"pip install 'nemo-desktop[{e.name}]'"})
    return rows
