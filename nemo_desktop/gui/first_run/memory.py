"""What the app remembers between sessions for a quick start: recent datasets and the last loaded models.

Stored in the GUI's QSettings (gui.ini, see gui/settings.py) under `first_run/`. Which remembered models can be
restored is decided here without Qt, from the disk alone: a model is restored only when its weights are there,
so starting the app never downloads anything.
"""
from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QSettings

RECENT_KEY = "first_run/recent_datasets"
MODELS_KEY = "first_run/last_models"
RECENT_MAX = 8
REMEMBERED_KINDS = ("classifier", "mllm", "editor")


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


def why_not_restorable(session, kind: str, ref: str) -> str | None:
    """None when `ref` can be loaded from the disk alone, else a short reason (Qt-free; no network)."""
    from nemo_desktop.core.models.catalog import get_entry
    from nemo_desktop.core.models.downloads import entry_status

    from ..session import ENDPOINT_PREFIX

    if ref.startswith(ENDPOINT_PREFIX):
        name = ref[len(ENDPOINT_PREFIX):]
        return None if session.settings().endpoint(name) is not None else f"the endpoint '{name}' is not configured"
    try:
        entry = get_entry(ref)
    except Exception:  # noqa: BLE001 - a <family>:<source> ref: restorable when its source is a path on disk
        source = ref.partition(":")[2]
        for prefix in ("local-dir:", "checkpoint:"):
            if source.startswith(prefix):
                source = source[len(prefix):].rpartition(":")[2] if prefix == "checkpoint:" else source[len(prefix):]
        return None if source and Path(source).expanduser().exists() else "its weights are not on disk"
    status = entry_status(entry).status
    if status in ("downloaded", "local"):
        return None
    return {"not downloaded": "its weights are not downloaded", "partial": "its download is incomplete",
            "missing": "its weights are no longer on disk"}.get(status, f"its weights are {status}")


def restore_models(session, wanted: dict[str, str], ctx) -> dict[str, list]:
    """Load each remembered model whose weights are on disk (never downloading); the others are skipped with a
    reason. Runs on the GPU lane. {"restored": [(kind, ref)], "skipped": [(kind, ref, reason)]}."""
    from nemo_desktop.core.errors import JobCancelled

    out: dict[str, list] = {"restored": [], "skipped": []}
    for kind in REMEMBERED_KINDS:
        ref = wanted.get(kind)
        if not ref:
            continue
        reason = why_not_restorable(session, kind, ref)
        if reason is None:
            try:
                session.load(kind, ref, ctx, local_only=True)
                out["restored"].append((kind, ref))
                continue
            except JobCancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - a start-up restore never fails loudly: it says why, quietly
                reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        out["skipped"].append((kind, ref, reason))
    return out


def describe_restore(outcome: dict[str, list]) -> str:
    from ..session import KIND_TEXT

    parts = []
    if outcome["restored"]:
        parts.append("Restored the last models: " + ", ".join(f"{KIND_TEXT.get(k, k)} {r}"
                                                             for k, r in outcome["restored"]) + ".")
    for kind, ref, reason in outcome["skipped"]:
        parts.append(f"The last {KIND_TEXT.get(kind, kind)} {ref} was not loaded: {reason}.")
    return " ".join(parts)
