"""The fixed model as a new user-catalog entry: safetensors weights, the class names, and its lineage (base model
and revision, data sources and counts, settings, figures). The original model is never touched.

Weights are written to a hidden folder beside their final place and moved there in one rename, and the catalog
entry is written (atomically) only after that: a cancelled or killed fix leaves no catalog entry and no weights
folder under the final name. A re-run of the same fix (same result key) finds its folder and entry again.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...jobs import JobContext

LINEAGE_FILE = "lineage.json"
WEIGHTS_FILE = "model.safetensors"


def can_save(classifier: Any) -> str | None:
    """None when the classifier can become a catalog entry, else why not."""
    info = getattr(classifier, "info", None)
    if getattr(info, "family", None) != "timm" or not (getattr(info, "extra", None) or {}).get("architecture"):
        return (f"{getattr(info, 'model_id', type(classifier).__name__)} is not a timm classifier: only timm "
                "models (their architecture plus safetensors weights) can be saved as catalog entries")
    return None


def default_name(base_id: str, key: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", base_id.split("/")[-1]).strip("-") or "model"
    return f"{stem}-fix-{key[:8]}"


def fixed_models_dir() -> Path:
    from ...store.paths import get_paths

    return get_paths().weights_dir / "fixed"


def _json_ready(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _json_ready(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_ready(x) for x in v]
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


def save_fixed(classifier: Any, module: Any, name: str, lineage: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Write the weights and the entry; returns {"id", "folder", "weights", "bytes"}."""
    from safetensors.torch import save_file

    from ...models.catalog import get_entry
    from ...models.user_catalog import put_user_entry

    why = can_save(classifier)
    if why:
        raise ConfigError(f"Cannot save the fixed model: {why}.", hint="Run the fix with save off (--no-save).")
    info = classifier.info
    if name.lower() == str(info.model_id).lower():
        raise ConfigError(f"The fixed model cannot take the base model's name '{name}'.", hint="Choose another name.")
    folder = fixed_models_dir() / name
    try:
        existing = get_entry(name)
    except ConfigError:
        existing = None
    if existing is not None and (existing.options.get("lineage") or {}).get("key") != lineage["key"]:
        raise ConfigError(f"A model named '{name}' is already in the catalog.",
                          hint="Choose another name for the fixed model (--name).")
    if not (folder / LINEAGE_FILE).is_file() or \
            json.loads((folder / LINEAGE_FILE).read_text(encoding="utf-8")).get("key") != lineage["key"]:
        if folder.exists():
            raise ConfigError(f"{folder} exists and holds another model.", hint="Choose another name (--name).")
        tmp = folder.with_name(f".{name}.partial-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
            save_file(state, str(tmp / WEIGHTS_FILE), metadata={"base_model": str(info.model_id),
                                                                  "lineage_key": lineage["key"]})
            (tmp / "classes.txt").write_text("\n".join(classifier.class_names) + "\n", encoding="utf-8")
            (tmp / LINEAGE_FILE).write_text(json.dumps(_json_ready(lineage), indent=2), encoding="utf-8")
            ctx.check_cancelled()  # the last point a cancel stops the save: after it the rename and entry follow
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    weights = folder / WEIGHTS_FILE
    size = weights.stat().st_size
    base = _base_entry(info.model_id)
    data_config = getattr(classifier, "data_config", None) or {}
    entry = {
        "id": name, "kind": "classifier", "family": "timm", "repo": str(folder),
        "source": f"checkpoint:{info.extra['architecture']}:{weights}", "revision": lineage["key"][:16],
        "license": base.license if base else "the base model's license",
        "gated": False, "disk_size_bytes": size, "vram_bf16_gb": max(0.01, round(size / 2 / 1e9 + 0.05, 2)),
        "recommended_gpu": base.recommended_gpu if base else "any",
        "description": f"{info.model_id} fixed by NEMO ({lineage['config']['mode']}, "
                       f"{lineage['config']['data']} data): {lineage.get('summary', '')}".strip(),
        "options": {"class_names": list(classifier.class_names), "data_config": _json_ready(dict(data_config)),
                    "lineage": _json_ready(lineage)},
        "notes": f"Base model {info.model_id} (revision {info.revision}); lineage in {folder / LINEAGE_FILE}.",
    }
    try:
        put_user_entry(entry, "the fixed model")
    except BaseException:
        if existing is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return {"id": name, "folder": str(folder), "weights": str(weights), "bytes": size}


def _base_entry(model_id: str):
    from ...models.catalog import get_entry

    try:
        return get_entry(str(model_id))
    except ConfigError:
        return None
