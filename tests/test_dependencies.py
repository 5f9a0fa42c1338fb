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
}


# Imported, not declared: why the package works without them.
GUARDED = {
    "httpx2": "huggingface_hub >= 2's HTTP client: downloads.py tries it, then httpx, then plain exceptions",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {_norm(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]) for d in deps}


def _extras() -> set[str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {_norm(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]) for deps in extras.values() for d in deps}


def _imported_distributions() -> set[str]:
    modules = set()
    for f in (ROOT / "nemo_desktop").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    owners = md.packages_distributions()
    return {_norm(d) for m in modules for d in owners.get(m, ())}


def test_every_declared_dependency_is_imported_or_has_a_reason():
    declared = _declared()
    unused = declared - _imported_distributions()
    assert unused - set(INDIRECT) == set(), "declared but never imported: remove them or say why in INDIRECT"
    assert set(INDIRECT) <= declared, "INDIRECT names a package that is no longer declared"


def test_every_imported_distribution_is_declared():
    imported = _imported_distributions() - {"nemo-desktop"}
    undeclared = imported - _declared() - _extras() - set(GUARDED)
    assert undeclared == set(), "imported by nemo_desktop but not declared in pyproject.toml"
