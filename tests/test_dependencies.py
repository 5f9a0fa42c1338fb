"""Every declared dependency is needed: imported by the package, or listed below with the reason the package
needs it without importing it (a library that another one loads at run time). And the other way round: every
distribution the package imports is declared, as a dependency or in an extra (a module imported but left
undeclared works in a developer's venv and fails on a clean install: lpips once did exactly that in CI)."""
from __future__ import annotations

import ast
import importlib.metadata as md
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]

# Declared, not imported by nemo_desktop: why each is still needed.
INDIRECT = {
    "torch-fidelity": "torchmetrics' FrechetInceptionDistance/KID build their Inception feature extractor with it (competency FD/KD)",
    "accelerate": "transformers' from_pretrained(device_map=...) in the MLLM adapter requires it",
    "protobuf": "transformers converts tokenizers that ship only a sentencepiece model (no tokenizer.json)",
    "sentencepiece": "the same conversion of sentencepiece-only tokenizers",
    "safetensors": "the weight format transformers, diffusers, timm and open_clip load (floor: transformers')",
    "tokenizers": "transformers' fast tokenizers (floor: transformers')",
    "torchvision": "timm's and open_clip's image transforms (kept a matching pair with torch)",
    "uharfbuzz": "fpdf2's set_text_shaping (Arabic/Hebrew text in PDF reports)",
    "ipywidgets": "tqdm.auto's notebook progress bars in the Python API (the notebook extra)",
}


# Imported, not declared: why the package works without them.
GUARDED = {
    "httpx2": "huggingface_hub >= 2's HTTP client: downloads.py tries it, then httpx, then plain exceptions",
    "httpx": "the HTTP client of huggingface_hub < 2, the same fallback in downloads.py (installed by other packages, "
             "e.g. fiftyone)",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {_norm(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]) for d in deps}


def _names(deps) -> set[str]:
    return {_norm(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]) for d in deps}


def _extras(*names: str) -> set[str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {n for name, deps in extras.items() if not names or name in names for n in _names(deps)}


def _capabilities() -> dict[str, set[str]]:
    """The capability extras (core/base/extras.py), each with its distributions."""
    from nemo_desktop.core.base.extras import EXTRAS

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {name: _names(extras[name]) for name in EXTRAS}


def _gui_capabilities() -> dict[str, set[str]]:
    """The capability extras the desktop app's `gui` extra bundles (Extra.in_gui)."""
    from nemo_desktop.core.base.extras import EXTRAS

    return {name: deps for name, deps in _capabilities().items() if EXTRAS[name].in_gui}


def _imported_modules() -> set[str]:
    modules = set()
    for f in (ROOT / "nemo_desktop").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules


def _imported_owners() -> dict[str, set[str]]:
    """Each top-level module nemo_desktop imports -> the installed distributions that provide it (several for a
    namespace shared by a package and its plugins, e.g. fiftyone, fiftyone-brain and fiftyone-db)."""
    owners = md.packages_distributions()
    return {m: {_norm(d) for d in owners.get(m, ())} for m in _imported_modules()}


def _imported_distributions() -> set[str]:
    return set().union(*_imported_owners().values())


def _unbundled_missing() -> set[str]:
    """Distributions of extras outside `all` (core/base/extras.py in_all=False) that this environment lacks: their imports
    cannot be traced to a distribution here."""
    from nemo_desktop.core.base.extras import EXTRAS, available

    caps = _capabilities()
    return {d for name, e in EXTRAS.items() if not e.in_all and not available(name) for d in caps[name]}


def test_every_declared_dependency_is_imported_or_has_a_reason():
    declared = (_declared() | _extras(*_capabilities())) - _unbundled_missing()
    unused = declared - _imported_distributions() - {_norm(m) for m in _imported_modules()}  # + not installed here
    assert unused - set(INDIRECT) == set(), "declared but never imported: remove them or say why in INDIRECT"
    assert set(INDIRECT) <= declared, "INDIRECT names a package that is no longer declared"


def test_each_capability_extra_is_in_gui_and_all_and_not_in_the_core():
    """A desktop user (`gui`) and `all` get every capability; the core install none of their packages."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    from nemo_desktop.core.base.extras import EXTRAS

    capabilities = _capabilities()
    assert set(capabilities) <= set(extras), "core/base/extras.py names an extra pyproject.toml lacks"
    wanted = set().union(*_gui_capabilities().values())
    unbundled = set().union(*(d for name, d in capabilities.items() if not EXTRAS[name].in_all))
    assert not unbundled & (_names(extras["gui"]) | _names(extras["all"])), "an unbundled extra is in gui/all"
    assert wanted <= _names(extras["gui"]) and wanted <= _names(extras["all"])
    assert set().union(*(d for name, d in capabilities.items() if EXTRAS[name].in_all)) <= _names(extras["all"])
    assert _names(extras["gui"]) <= _names(extras["all"]) and _names(extras["keyring"]) <= _names(extras["all"])
    assert not wanted & _declared(), "a capability's package is also a core dependency"
    pins = {d for deps in extras.values() for d in deps}  # one version range per package across the extras
    by_name = {}
    for d in pins:
        by_name.setdefault(_names([d]).pop(), set()).add(d)
    assert {n: v for n, v in by_name.items() if len(v) > 1} == {}


def test_each_capability_extra_names_importable_modules_of_its_packages():
    """core/base/extras.py checks modules with find_spec: each must belong to one of the extra's distributions."""
    from nemo_desktop.core.base.extras import EXTRAS
    from nemo_desktop.core.base.extras import available as extras_available

    owners = md.packages_distributions()
    capabilities = _capabilities()
    for name, extra in EXTRAS.items():
        if not extra.in_all and not extras_available(name):
            continue  # not installed here (outside gui): nothing to check its modules against
        for module in extra.modules:
            # a module not installed here (ipywidgets, keyring): its distribution has the module's name
            assert {_norm(d) for d in owners.get(module, (module,))} & capabilities[name], (name, module)


def test_every_imported_distribution_is_declared():
    """A module is declared when one of the distributions providing it is (fiftyone's namespace is shared by
    fiftyone-brain and its database packages, installed with it)."""
    known = _declared() | _extras() | set(GUARDED) | {"nemo-desktop"}
    undeclared = {d for dists in _imported_owners().values() if dists and not dists & known for d in dists}
    assert undeclared == set(), "imported by nemo_desktop but not declared in pyproject.toml"
