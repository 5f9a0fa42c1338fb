"""What a fix trains and is measured on, and the targeted data it adds (issue 29).

    data = FixData(class_names, train=[(image, label), ...], affected=[...], rest=[...])
    extra, sources = targeted_data(data, config, editor, store, ctx)

`train` is the classifier's training data (or a sample of it); `affected` the held-out images the finding covers
(the cause present, the model often wrong) and `rest` every other held-out image. Labels are class indices.
Targeted data, every source recorded with its count:

  * edit (counterfactual augmentation): the validated edit that removes the cause, applied with the editor to
    training images of the predicted (shortcut) classes, labels kept; and, when given, the edit that adds the
    cause, applied to training images of the affected classes, their true labels kept;
  * augment (the control): the same images, the same count, under a plain augmentation instead of the edit;
  * none (a same-steps control): the same images added unchanged;
  * finding-images (edit fixes only, when given): a failure mode's own images with their true labels.

Edited images are stored by a key of the image, instruction, editor and seed, so a resumed fix edits nothing
twice (a real diffusion editor costs seconds per image).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter, ImageOps

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from ...store.keys import content_hash, result_key
from .config import FixConfig

EDIT_KIND = "fix-edit"


@dataclass
class FixData:
    class_names: list[str]
    train: list[tuple[Image.Image, int]]
    affected: list[tuple[Image.Image, int]]
    rest: list[tuple[Image.Image, int]]
    description: dict[str, Any] = field(default_factory=dict)  # where the data came from (folders, world)
    # A failure mode's own images with their true labels (not held out): added to the targeted data of an edit fix
    finding: list[tuple[Image.Image, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.class_names)
        for name in ("train", "affected", "rest", "finding"):
            items = getattr(self, name)
            if not items and name in ("affected", "rest"):  # a prompt adoption trains nothing; a trained fix checks it
                raise ConfigError(f"The fix has no {name} images.",
                                  hint="A fix needs held-out images the finding covers and other held-out images "
                                       "(and, to train, training images).")
            bad = [y for _, y in items if not 0 <= int(y) < n]
            if bad:
                raise ConfigError(f"{len(bad)} {name} label(s) are not classes of the classifier (e.g. {bad[0]}).")

    def class_index(self, name: str) -> int:
        try:
            return self.class_names.index(name)
        except ValueError:
            raise ConfigError(f"'{name}' is not a class of the classifier.",
                              hint=f"Classes: {', '.join(self.class_names[:20])}"
                                   f"{' ...' if len(self.class_names) > 20 else ''}.") from None

    def fingerprint(self) -> str:
        """Content hash of every image and label of the three sets (part of the result key)."""
        h = hashlib.sha256()
        for name in ("train", "affected", "rest", "finding"):
            h.update(name.encode())
            for img, y in getattr(self, name):
                h.update(content_hash(img).encode())
                h.update(str(int(y)).encode())
        return h.hexdigest()[:32]


def _pick(data: FixData, cls: int, n: int, rng: np.random.Generator) -> list[int]:
    idx = [i for i, (_, y) in enumerate(data.train) if int(y) == cls]
    if not idx:
        raise ConfigError(f"No training image of the class '{data.class_names[cls]}' to build targeted data from.")
    return sorted(int(i) for i in rng.choice(idx, size=min(n, len(idx)), replace=False))


def plan(data: FixData, config: FixConfig) -> list[dict[str, Any]]:
    """The data plan: which training images get which treatment (row numbers of `data.train`), seeded."""
    rng = np.random.default_rng(config.seed)
    groups = []
    # A control keeps the plan of the fix it controls (the same images, the same count): the directions follow
    # the edits given; without any edit, both class lists.
    none_given = not (config.instruction.strip() or config.cue_instruction.strip()) and config.data != "edit"
    if config.instruction.strip() or none_given:
        for name in config.predicted:
            groups.append({"direction": "remove", "class": name,
                           "rows": _pick(data, data.class_index(name), config.per_class, rng)})
    if config.cue_instruction.strip() or none_given:
        for name in config.affected:
            groups.append({"direction": "add", "class": name,
                           "rows": _pick(data, data.class_index(name), config.per_class, rng)})
    return groups


def augment(img: Image.Image, how: str, seed: int) -> Image.Image:
    """One plain augmentation of `img`, seeded."""
    rng = np.random.default_rng(seed)
    img = img.convert("RGB")
    if how == "colour-jitter":
        for enhancer in (ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color):
            img = enhancer(img).enhance(float(rng.uniform(0.6, 1.4)))
        return img
    if how == "grayscale":
        return ImageOps.grayscale(img).convert("RGB")
    if how == "blur":
        return img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.5, 1.5))))
    if how == "flip":
        return ImageOps.mirror(img)
    raise ConfigError(f"Unknown augmentation '{how}'.")


def _editor_id(editor: Any) -> dict[str, Any]:
    info = getattr(editor, "info", None)
    return {"id": getattr(info, "model_id", type(editor).__name__), "revision": getattr(info, "revision", None)}


def _edited(editor: Any, img: Image.Image, instruction: str, seed: int, store: Any, ctx: JobContext) -> Image.Image:
    key = result_key(EDIT_KIND, image=content_hash(img.convert("RGB")), instruction=instruction,
                     editor=_editor_id(editor), seed=seed)
    if store is not None:
        hit = store.get(key)
        if hit is not None and "image" in hit.artifacts:
            return hit.load_image("image").convert("RGB")
    out = editor.edit(img.convert("RGB"), instruction, seed=seed, size=img.size,
                      on_step=lambda i, total=None: not ctx.cancelled)
    out = out.convert("RGB")
    if store is not None:
        store.put(key, EDIT_KIND, {"instruction": instruction, "seed": seed}, artifacts={"image": out})
    return out


def targeted_data(data: FixData, config: FixConfig, editor: Any, store: Any, ctx: JobContext) \
        -> tuple[list[tuple[Image.Image, int]], list[dict[str, Any]]]:
    """(extra training images with labels, the sources: one record per group with its count)."""
    groups = plan(data, config)
    if config.data == "edit" and editor is None and groups:
        raise ConfigError("Targeted data from an edit needs an image editor.",
                          hint="Give one (--editor), or choose --data augment for the control.")
    total = sum(len(g["rows"]) for g in groups)
    extra: list[tuple[Image.Image, int]] = []
    sources = []
    done = 0
    for g in groups:
        if config.data == "edit":
            instruction = config.instruction if g["direction"] == "remove" else config.cue_instruction
            source = {"source": f"edit:{g['direction']}", "instruction": instruction, "editor": _editor_id(editor)}
        elif config.data == "augment":
            source = {"source": f"augment:{config.augmentation}"}
        else:
            source = {"source": "unchanged"}
        for row in g["rows"]:
            ctx.check_cancelled()
            img, y = data.train[row]
            seed = config.seed * 1_000_003 + row
            if config.data == "edit":
                new = _edited(editor, img, instruction, seed, store, ctx)
            elif config.data == "augment":
                new = augment(img, config.augmentation, seed)
            else:
                new = img.convert("RGB")
            extra.append((new, int(y)))
            done += 1
            ctx.progress("Preparing targeted data", done, total)
        sources.append({**source, "direction": g["direction"], "class": g["class"], "count": len(g["rows"])})
    if config.data == "edit" and data.finding:
        extra += [(im.convert("RGB"), int(y)) for im, y in data.finding]
        for c in sorted({int(y) for _, y in data.finding}):
            sources.append({"source": "finding-images", "direction": "true-label", "class": data.class_names[c],
                            "count": sum(1 for _, y in data.finding if int(y) == c)})
    return extra, sources


def image_label_lists(items: Sequence[tuple[Image.Image, int]]) -> tuple[list[Image.Image], np.ndarray]:
    return [im for im, _ in items], np.asarray([int(y) for _, y in items], dtype=np.int64)
