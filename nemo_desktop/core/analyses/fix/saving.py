"""The fixed model as a new user-catalog entry: safetensors weights, the class names, and its lineage (base model
and revision, data sources and counts, settings, figures). The original model is never touched.

What a kept fix becomes depends on what the classifier's family can load again (`save_form`, said in the plan
before the run):
  * timm (its architecture in ModelInfo.extra): a catalog entry of the timm family (the architecture plus the
    fixed checkpoint), loaded with `-c <id>`;
  * a family whose adapter has `fixed_catalog_entry(weights_path) -> dict` (a plugin family that can load a
    checkpoint): a catalog entry with the fields it returns (family, source, options...);
  * any other torch classifier (a plugin family without that hook, an object passed to the API): the weights
    alone, `model.safetensors` (the fixed module's state dict) with `classes.txt` and `lineage.json`, and no
    catalog entry; load them into the same architecture with
    `module.load_state_dict(safetensors.torch.load_file(path))`.

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

from ...base.errors import ConfigError
from ...base.job_context import JobContext

LINEAGE_FILE = "lineage.json"
WEIGHTS_FILE = "model.safetensors"


def save_form(classifier: Any) -> dict[str, Any]:
    """How a kept fix of `classifier` is saved: {"form": "catalog" | "weights", "how": in words}."""
    info = getattr(classifier, "info", None)
    if getattr(info, "family", None) == "timm" and (getattr(info, "extra", None) or {}).get("architecture"):
        return {"form": "catalog", "how": "a new user-catalog entry (the timm architecture and the fixed "
                                          "safetensors weights), loaded with -c <id>"}
    if callable(getattr(classifier, "fixed_catalog_entry", None)):
        return {"form": "catalog", "how": f"a new user-catalog entry of the {getattr(info, 'family', '?')} family "
                                          "(its adapter's fixed_catalog_entry), loaded with -c <id>"}
    family = getattr(info, "family", None) or type(classifier).__name__
    return {"form": "weights", "how": f"the fixed weights only (model.safetensors, classes.txt, lineage.json in "
                                      f"{fixed_models_dir()}/<name>/), no catalog entry: the {family} family "
                                      "cannot load a fixed checkpoint by id; load the file into the same "
                                      "architecture with load_state_dict(safetensors.torch.load_file(path))"}


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
    """Write the weights and, where the family can load them by id, the catalog entry (save_form); returns
    {"id" (None without an entry), "folder", "weights", "bytes", "form"}."""
    from ...models.catalog import get_entry
    from ...models.user_catalog import put_user_entry

    form = save_form(classifier)["form"]
    info = classifier.info
    if name.lower() == str(info.model_id).lower():
        raise ConfigError(f"The fixed model cannot take the base model's name '{name}'.", hint="Choose another name.")
    folder = fixed_models_dir() / name
    existing = None
    if form == "catalog":
        try:
            existing = get_entry(name)
        except ConfigError:
            existing = None
        if existing is not None and (existing.options.get("lineage") or {}).get("key") != lineage["key"]:
            raise ConfigError(f"A model named '{name}' is already in the catalog.",
                              hint="Choose another name for the fixed model (--name).")
    _write_folder(classifier, module, folder, lineage, ctx)
    weights = folder / WEIGHTS_FILE
    size = weights.stat().st_size
    if form == "weights":
        return {"id": None, "folder": str(folder), "weights": str(weights), "bytes": size, "form": form}
    entry = _timm_entry(classifier, name, folder, lineage, size) if info.family == "timm" else {
        "id": name, "kind": "classifier", "repo": str(folder), "revision": lineage["key"][:16],
        "license": "the base model's license", "gated": False, "disk_size_bytes": size,
        "vram_bf16_gb": max(0.01, round(size / 2 / 1e9 + 0.05, 2)), "recommended_gpu": "any",
        "description": f"{info.model_id} fixed by NEMO: {lineage.get('summary', '')}".strip(),
        "notes": f"Base model {info.model_id} (revision {info.revision}); lineage in {folder / LINEAGE_FILE}.",
        **classifier.fixed_catalog_entry(weights)}
    entry.setdefault("options", {})["lineage"] = _json_ready(lineage)
    try:
        put_user_entry(entry, "the fixed model")
    except BaseException:
        if existing is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return {"id": name, "folder": str(folder), "weights": str(weights), "bytes": size, "form": form}


def _write_folder(classifier: Any, module: Any, folder: Path, lineage: dict[str, Any], ctx: JobContext) -> None:
    """The weights, class names and lineage, written to a hidden folder and renamed into place (a re-run of the
    same fix finds its folder again; another fix's folder is never overwritten)."""
    from safetensors.torch import save_file

    if (folder / LINEAGE_FILE).is_file() and \
            json.loads((folder / LINEAGE_FILE).read_text(encoding="utf-8")).get("key") == lineage["key"]:
        return
    if folder.exists():
        raise ConfigError(f"{folder} exists and holds another model.", hint="Choose another name (--name).")
    tmp = folder.with_name(f".{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
        save_file(state, str(tmp / WEIGHTS_FILE), metadata={"base_model": str(classifier.info.model_id),
                                                              "lineage_key": lineage["key"]})
        (tmp / "classes.txt").write_text("\n".join(classifier.class_names) + "\n", encoding="utf-8")
        (tmp / LINEAGE_FILE).write_text(json.dumps(_json_ready(lineage), indent=2), encoding="utf-8")
        ctx.check_cancelled()  # the last point a cancel stops the save: after it the rename and entry follow
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _timm_entry(classifier: Any, name: str, folder: Path, lineage: dict[str, Any], size: int) -> dict[str, Any]:
    info = classifier.info
    weights = folder / WEIGHTS_FILE
    base = _base_entry(info.model_id)
    data_config = getattr(classifier, "data_config", None) or {}
    return {
        "id": name, "kind": "classifier", "family": "timm", "repo": str(folder),
        "source": f"checkpoint:{info.extra['architecture']}:{weights}", "revision": lineage["key"][:16],
        "license": base.license if base else "the base model's license",
        "gated": False, "disk_size_bytes": size, "vram_bf16_gb": max(0.01, round(size / 2 / 1e9 + 0.05, 2)),
        "recommended_gpu": base.recommended_gpu if base else "any",
        "description": f"{info.model_id} fixed by NEMO ({lineage['config']['mode']}, "
                       f"{lineage['config']['data']} data): {lineage.get('summary', '')}".strip(),
        "options": {"class_names": list(classifier.class_names), "data_config": _json_ready(dict(data_config))},
        "notes": f"Base model {info.model_id} (revision {info.revision}); lineage in {folder / LINEAGE_FILE}.",
    }


def _base_entry(model_id: str):
    from ...models.catalog import get_entry

    try:
        return get_entry(str(model_id))
    except ConfigError:
        return None
