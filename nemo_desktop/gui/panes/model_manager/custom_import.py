"""Import a user's fine-tuned timm classifier into the user catalog (Qt-free: runs as a job).

The entry is written to `<config>/catalog.json` (the catalog's documented user file), so the CLI sees the
same model (`nemo explain --classifier <id>`). It loads through the timm family's checkpoint source,
`checkpoint:<architecture>:<file>` with options.class_file: the same path as `--classifier` on the CLI.
Only the catalog entry is ever removed here; the user's weight and class files are never deleted.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from nemo_desktop.core.errors import ConfigError

CHECKPOINT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class CheckpointImport:
    model_id: str
    architecture: str
    weights: Path
    class_file: Path
    description: str = ""


def class_count(class_file: Path) -> int:
    from nemo_desktop.core.models.vocab import read_class_file

    return len(read_class_file(class_file))


def entry_dict(imp: CheckpointImport) -> dict:
    """The catalog entry for an import; raises ConfigError naming the first problem."""
    if not _ID_RE.match(imp.model_id):
        raise ConfigError(f"'{imp.model_id}' cannot be a model name.",
                          hint="Use letters, digits, '.', '_' or '-' (at most 64 characters), e.g. my-resnet50.")
    arch = imp.architecture.strip()
    if not re.match(r"^[A-Za-z0-9_.]+$", arch or ""):
        raise ConfigError("Give the timm architecture the weights were trained with, e.g. resnet50.")
    weights = Path(imp.weights).expanduser().resolve()
    if not weights.is_file():
        raise ConfigError(f"Weights file not found: {weights}", hint="Choose the .safetensors or .pth file.")
    if weights.suffix.lower() not in CHECKPOINT_SUFFIXES:
        raise ConfigError(f"'{weights.name}' is not a weights file NEMO Desktop reads.",
                          hint="Use a .safetensors file (preferred) or a .pth / .pt state dict.")
    class_file = Path(imp.class_file).expanduser().resolve()
    n = class_count(class_file)  # ConfigError when missing or empty
    size = weights.stat().st_size
    # A state dict of float32 weights holds ~size/4 parameters; bf16 needs 2 bytes each, plus activations.
    vram = round(max(0.1, size / 2 / 1e9 * 1.25 + 0.1), 1)
    return {
        "id": imp.model_id, "kind": "classifier", "family": "timm", "repo": str(weights),
        "source": f"checkpoint:{arch}:{weights}", "revision": "local", "license": "user-provided",
        "gated": False, "disk_size_bytes": max(1, size), "vram_bf16_gb": vram, "recommended_gpu": "any",
        "description": imp.description.strip() or f"Imported {arch} checkpoint ({n} classes)",
        "options": {"class_file": str(class_file)}, "estimated": ["vram_bf16_gb"],
        "notes": f"Imported from {weights.name} with class names from {class_file.name}.",
    }


def _read_user_catalog(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"The user catalog {path} cannot be read, so nothing was added to it.",
                          hint="Fix or move the file, then import again.", detail=repr(exc)) from exc
    items = data.get("entries") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ConfigError(f"The user catalog {path} has no 'entries' list.", hint="Fix or move the file.")
    return items


def _write_user_catalog(path: Path, items: list[dict]) -> None:
    from nemo_desktop.core.store.atomic import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"entries": items}, indent=2, ensure_ascii=False) + "\n")


def add_checkpoint(imp: CheckpointImport):
    """Validate and add (or replace) the user-catalog entry; returns the CatalogEntry as the catalog sees it."""
    from nemo_desktop.core.models.catalog import entry_from_dict, get_entry, list_catalog, user_catalog_path

    data = entry_dict(imp)
    entry_from_dict(data, "import")  # the catalog's own validation, before anything is written
    shipped = {e.id.lower() for e in list_catalog() if e.origin == "shipped"}
    if imp.model_id.lower() in shipped:
        raise ConfigError(f"'{imp.model_id}' is the name of a model in the shipped catalog.",
                          hint="Choose another name for your classifier.")
    path = user_catalog_path()
    items = [e for e in _read_user_catalog(path) if not (isinstance(e, dict) and e.get("id") == imp.model_id)]
    _write_user_catalog(path, items + [data])
    return get_entry(imp.model_id)


def remove_user_entry(model_id: str) -> bool:
    """Drop an entry from the user catalog (files untouched); False when it was not there."""
    from nemo_desktop.core.models.catalog import user_catalog_path

    path = user_catalog_path()
    items = _read_user_catalog(path)
    kept = [e for e in items if not (isinstance(e, dict) and e.get("id") == model_id)]
    if len(kept) == len(items):
        return False
    _write_user_catalog(path, kept)
    return True
