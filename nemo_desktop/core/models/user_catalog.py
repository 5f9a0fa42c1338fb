"""Add or replace entries in the user catalog (`<config>/catalog.json`, read by `catalog.list_catalog`).

The file is what the Model manager's import writes too: `{"entries": [...]}`, one JSON object per model. Every
entry is validated by the catalog's own `entry_from_dict` before anything is written, and the file is
replaced atomically, so a bad entry or a crash never leaves a half-written catalog.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError
from .catalog import CatalogEntry, entry_from_dict, get_entry, list_catalog, user_catalog_path


def read_user_entries(path: Path | None = None) -> list[dict[str, Any]]:
    path = path or user_catalog_path()
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"The user catalog {path} cannot be read, so nothing was added to it.",
                          hint="Fix or move the file, then try again.", detail=repr(exc)) from exc
    items = data.get("entries") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ConfigError(f"The user catalog {path} has no 'entries' list.", hint="Fix or move the file.")
    return items


def _write_user_entries(path: Path, items: list[dict[str, Any]]) -> None:
    from ..store.atomic import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"entries": items}, indent=2, ensure_ascii=False) + "\n")


def _without(items: list[Any], model_id: str) -> list[Any]:
    return [e for e in items if not (isinstance(e, dict) and e.get("id") == model_id)]


def put_user_entry(data: dict[str, Any], what: str = "the new entry") -> CatalogEntry:
    """Validate `data` and write it to the user catalog, replacing an entry with the same id. A shipped id is
    refused (the user catalog would shadow it)."""
    entry_from_dict(data, what)
    shipped = {e.id.lower() for e in list_catalog() if e.origin == "shipped"}
    if str(data["id"]).lower() in shipped:
        raise ConfigError(f"'{data['id']}' is the name of a model in the shipped catalog.",
                          hint="Choose another name.")
    path = user_catalog_path()
    _write_user_entries(path, _without(read_user_entries(path), data["id"]) + [data])
    return get_entry(data["id"])


def remove_user_entry(model_id: str) -> bool:
    """Drop an entry from the user catalog (files untouched); False when it was not there."""
    path = user_catalog_path()
    items = read_user_entries(path)
    kept = _without(items, model_id)
    if len(kept) == len(items):
        return False
    _write_user_entries(path, kept)
    return True
