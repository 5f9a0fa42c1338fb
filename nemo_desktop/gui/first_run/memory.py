"""What the app remembers between sessions for a quick start: recent datasets and the last loaded models.

Stored under `first_run/` keys in the window's `BackgroundSettings` (gui-state.json, written off the GUI thread;
see gui/settings.py); each function also takes a QSettings. Which remembered models can be
restored is decided here without Qt, from the disk alone: a model is restored only when its weights are there,
so starting the app never downloads anything.
"""
from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QSettings

# Restoring runs models, so it lives with the other model jobs (the model worker process runs it too).
from nemo_desktop.core.app.jobs.models import REMEMBERED_KINDS, restore_models, why_not_restorable  # noqa: F401

RECENT_KEY = "first_run/recent_datasets"
MODELS_KEY = "first_run/last_models"
RECENT_MAX = 8


def recent_datasets(settings: QSettings) -> list[str]:
    return [p for p in _json_list(settings.value(RECENT_KEY)) if isinstance(p, str) and p]


def add_recent_dataset(settings: QSettings, path: str) -> list[str]:
    path = str(Path(path))
    items = [path] + [p for p in recent_datasets(settings) if p != path]
    settings.setValue(RECENT_KEY, json.dumps(items[:RECENT_MAX]))
    settings.sync()
    return items[:RECENT_MAX]


def remove_recent_dataset(settings: QSettings, path: str) -> list[str]:
    items = [p for p in recent_datasets(settings) if p != path]
    settings.setValue(RECENT_KEY, json.dumps(items))
    settings.sync()
    return items


def remembered_models(settings: QSettings) -> dict[str, str]:
    raw = settings.value(MODELS_KEY)
    try:
        data = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    return {k: v for k, v in data.items() if k in REMEMBERED_KINDS and isinstance(v, str) and v} \
        if isinstance(data, dict) else {}


def remember_models(settings: QSettings, loaded: dict[str, str]) -> None:
    settings.setValue(MODELS_KEY, json.dumps({k: loaded[k] for k in REMEMBERED_KINDS if k in loaded}))
    settings.sync()


def _json_list(raw) -> list:
    try:
        data = json.loads(raw) if isinstance(raw, str) else []
    except ValueError:
        return []
    return data if isinstance(data, list) else []


def describe_restore(outcome: dict[str, list]) -> str:
    from ...core.app.session import KIND_TEXT

    parts = []
    if outcome["restored"]:
        parts.append("Restored the last models: " + ", ".join(f"{KIND_TEXT.get(k, k)} {r}"
                                                             for k, r in outcome["restored"]) + ".")
    for kind, ref, reason in outcome["skipped"]:
        parts.append(f"The last {KIND_TEXT.get(kind, kind)} {ref} was not loaded: {reason}.")
    return " ".join(parts)
