"""Zero-shot fixes (issue 29): "adopt this prompt". A CLIP/SigLIP/open_clip classifier's class prompts are its
state, so a finding's fix is a rewritten prompt (SciTX's prompt intervention, or a failure mode's sentence turned
into a class prompt). Adopting it is measured exactly like a trained fix: accuracy before and after on the
finding's held-out images and on everything else, overall and per class, with paired bootstrap intervals and n,
and the same regression guard (a prompt that helps one class by hurting another is rejected).

Every adopted prompt set is kept as a named, versioned set per classifier in `<config>/prompt_sets/<id>.json`
(each version with its prompts and lineage); `apply_prompt_set` loads one into a classifier. The `fix` analysis
adopts a prompt in its mode "prompt" (pipeline.py: keyed, stored, with a manifest, like every fix).

    figures = measure_prompts(clip, data, {"seven": "a photo of a seven on a dark background"}, margin=1.0)
    entry = save_prompt_set(clip, "dark-sevens", prompts_after(clip, changes), lineage=figures)
    apply_prompt_set(clip, load_prompt_set(clip.info.model_id, "dark-sevens"))
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Mapping

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from . import measure
from .data import FixData, image_label_lists


def _changes_by_index(classifier: Any, changes: Mapping[str, str]) -> dict[int, str]:
    names = list(classifier.class_names)
    out = {}
    for name, prompt in changes.items():
        if name not in names:
            raise ConfigError(f"'{name}' is not a class of {classifier.info.model_id}.")
        if not str(prompt).strip():
            raise ConfigError(f"The new prompt of '{name}' is empty.")
        out[names.index(name)] = str(prompt)
    if not out:
        raise ConfigError("No prompt to adopt.", hint="Give CLASS=PROMPT for at least one class.")
    return out


def prompts_after(classifier: Any, changes: Mapping[str, str]) -> list[str]:
    """The classifier's whole prompt list with the changes swapped in."""
    idx = _changes_by_index(classifier, changes)
    return [idx.get(i, classifier.class_prompt(i)) for i in range(len(classifier.class_names))]


def measure_prompts(classifier: Any, data: FixData, changes: Mapping[str, str], *, margin: float = 1.0,
                    min_gain: float = 0.0, resamples: int = 1000, seed: int = 0,
                    ctx: JobContext | None = None) -> dict[str, Any]:
    """Before/after figures of adopting `changes` ({class name: new prompt}) and the guard's verdict; "per_image":
    per held-out set, the images' pixel hashes and their classes before and after (as a trained fix records)."""
    from ...store.keys import content_hash

    if not getattr(classifier, "zero_shot", False):
        raise ConfigError(f"{classifier.info.model_id} is not a zero-shot classifier: it has no prompts to adopt.",
                          hint="Fix a trained classifier with targeted fine-tuning (nemo fix).")
    idx = _changes_by_index(classifier, changes)
    out: dict[str, Any] = {"changes": dict(changes), "prompts_before": [classifier.class_prompt(i) for i in idx],
                           "per_image": {}}
    for name, items in (("affected", data.affected), ("rest", data.rest)):
        if ctx is not None:
            ctx.check_cancelled()
            ctx.progress(f"Measuring ({name})", 0, 1)
        images, labels = image_label_lists(items)
        before = classifier.predict_proba(images).argmax(1)
        after = classifier.predict_proba(images, class_prompts=idx).argmax(1)
        out[name] = measure.measure_set(labels, before, after, data.class_names, resamples=resamples,
                                        seed=seed + (0 if name == "affected" else 7))
        out["per_image"][name] = {"sha256": [content_hash(im.convert("RGB")) for im in images],
                                  "before": [int(v) for v in before], "after": [int(v) for v in after]}
        if ctx is not None:
            ctx.progress(f"Measuring ({name})", 1, 1)
    out["guard"] = measure.guard(out["affected"], out["rest"], margin, min_gain)
    return out


def _sets_file(model_id: str) -> Path:
    from ...store.paths import get_paths

    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", str(model_id)).strip("_") or "classifier"
    return get_paths().config_dir / "prompt_sets" / f"{safe}.json"


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {"sets": []}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"The prompt sets file {path} cannot be read.", hint="Fix or move the file.",
                          detail=repr(exc)) from exc
    if not isinstance(data, dict) or not isinstance(data.get("sets"), list):
        raise ConfigError(f"The prompt sets file {path} has no 'sets' list.", hint="Fix or move the file.")
    return data


def save_prompt_set(classifier: Any, name: str, prompts: list[str], lineage: Mapping[str, Any] | None = None) \
        -> dict[str, Any]:
    """Keep `prompts` as the next version of the named set for this classifier; returns the stored entry."""
    from ...store.atomic import atomic_write_text

    if not re.fullmatch(r"[A-Za-z0-9._-]+", name or ""):
        raise ConfigError(f"'{name}' is not a usable prompt set name.", hint="Use letters, digits, '.', '_' or '-'.")
    if len(prompts) != len(classifier.class_names):
        raise ConfigError(f"A prompt set needs one prompt per class ({len(classifier.class_names)}), "
                          f"not {len(prompts)}.")
    path = _sets_file(classifier.info.model_id)
    data = _read(path)
    version = 1 + max((s["version"] for s in data["sets"] if s.get("name") == name), default=0)
    entry = {"name": name, "version": version, "classifier": {"id": classifier.info.model_id,
                                                              "revision": classifier.info.revision},
             "class_names": list(classifier.class_names), "prompts": list(prompts), "created_at": time.time(),
             "lineage": dict(lineage or {})}
    data["sets"].append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    return entry


def list_prompt_sets(model_id: str) -> list[dict[str, Any]]:
    return [{k: s[k] for k in ("name", "version", "created_at")} for s in _read(_sets_file(model_id))["sets"]]


def load_prompt_set(model_id: str, name: str, version: int | None = None) -> dict[str, Any]:
    sets = [s for s in _read(_sets_file(model_id))["sets"] if s.get("name") == name]
    if version is not None:
        sets = [s for s in sets if s.get("version") == version]
    if not sets:
        raise ConfigError(f"No prompt set '{name}'{f' version {version}' if version else ''} for {model_id}.",
                          hint="List them with list_prompt_sets(model id).")
    return max(sets, key=lambda s: s["version"])


def apply_prompt_set(classifier: Any, prompt_set: Mapping[str, Any]) -> None:
    """Load a stored set into the classifier (its class names must match the set's)."""
    if list(prompt_set["class_names"]) != list(classifier.class_names):
        raise ConfigError(f"The prompt set '{prompt_set['name']}' was made for other classes.",
                          hint="Load it into a classifier with the same class list.")
    for i, prompt in enumerate(prompt_set["prompts"]):
        classifier.set_class_prompt(i, prompt)
