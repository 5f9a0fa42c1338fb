"""What the demo adds on request so that every analysis that runs without downloaded weights can be tried from
it (issue 43 §6): a second digits classifier for model-diff and a fix folder for fix.

* The second classifier is the demo's architecture trained by the demo's own training code on the digits of
  `nemo compare demo`'s model B (analyses/model_diff/demo.py: digits 0-4 on every background colour, 5-9 on blue
  only, at the condition grid's angles; the same `paper_bias` and `training_set`). The first demo classifier saw
  only white digits on black, so the two differ in ways model-diff can find with the "digits" condition source
  (background colours and angles). It is registered as `demo-digits-classifier-b`.
* The fix folder (train/, affected/, rest/, one sub-folder per class) plants a real, measured weakness of the
  demo classifier: the held-out digits one, four and seven drawn on a blue background (it was never shown a
  coloured background; measured at 360 held-out digits: 0 %, 3 % and 4 % right) are the affected images; every
  other held-out digit, drawn as the demo draws them, is the rest; the training images are a sample of the
  training pool, one in ten of them on blue. Affected classes: one, four, seven.

Both are built in a temporary folder and renamed into place with a manifest, and reused when current, as the
demo's dataset and classifier are (digits.py).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..base.job_context import JobContext, null_context
from ..store.paths import AppPaths, get_paths
from . import digits

SECOND_CLASSIFIER_ID = "demo-digits-classifier-b"
FIX_AFFECTED = ("one", "four", "seven")
FIX_CAUSE_COLOUR = "blue"
FIX_TRAIN_PER_CLASS = 30
FIX_CAUSE_EVERY = 10  # one training image in ten shows the cause
SECOND_EPOCHS = digits.EPOCHS


@dataclass(frozen=True)
class DemoExtra:
    """One extra the demo made (or reused): where it is, and what an analysis page needs to use it."""

    what: str  # "second-classifier" | "fix-folder"
    path: Path
    reused: bool
    model_id: str | None = None
    settings: dict[str, Any] | None = None  # the analysis page's settings that go with it
    summary: str = ""


def second_classifier_dir(paths: AppPaths | None = None) -> Path:
    return (paths or get_paths()).weights_dir / "demo" / f"digits-{digits.ARCHITECTURE}-b-v{digits.DEMO_VERSION}"


def fix_folder_dir(paths: AppPaths | None = None) -> Path:
    return digits.demo_root(paths) / f"fix-v{digits.DEMO_VERSION}"


# -- the second classifier ---------------------------------------------------------------------------------------

def _train_second(ctx: JobContext):
    from ..analyses.model_diff.demo import paper_bias
    from ..analyses.model_diff.synthetic_digits import training_set

    ctx.progress("Drawing model B's training digits", 0, None)
    images, labels = training_set(paper_bias("B"), size=digits.IMAGE_SIDE, seed=digits.SEED)
    return digits.train_classifier(ctx, epochs=SECOND_EPOCHS, training=(images, labels))


def ensure_second_classifier(paths: AppPaths | None = None, ctx: JobContext | None = None, *,
                             register: bool = True) -> DemoExtra:
    folder, manifest, reused = digits.ensure_classifier(
        second_classifier_dir(paths), ctx, kind="classifier-b", train=_train_second,
        about={"training": "nemo compare demo's model B: digits 0-4 on every background colour, 5-9 on blue only"})
    if register:
        from ..models.user_catalog import put_user_entry

        entry = digits.catalog_entry(folder)
        entry.update(id=SECOND_CLASSIFIER_ID, description=(
            "Demo: a second digit classifier (digits 0-4 on every background colour, 5-9 on blue only; "
            f"{manifest.get('holdout_accuracy', 0) * 100:.1f}% on the demo's held-out digits)"),
            notes="Built by the demo for model-diff: compare it with demo-digits-classifier on the 'digits' "
                  "conditions (background colours and angles).")
        put_user_entry(entry)
    return DemoExtra("second-classifier", folder, reused, model_id=SECOND_CLASSIFIER_ID,
                     settings={"conditions": "digits"},
                     summary=f"{SECOND_CLASSIFIER_ID} ({'reused' if reused else 'trained'}; "
                             f"{manifest.get('holdout_accuracy', 0) * 100:.1f}% on the demo's held-out digits)")


# -- the fix folder -----------------------------------------------------------------------------------------------

def _draw(glyph, colour: str | None):
    if colour is None:
        return digits.render(glyph)
    from ..analyses.model_diff.conditions import load_grid
    from ..analyses.model_diff.synthetic_digits import render_digit

    rgb = load_grid("cmnist").extra["colors_rgb"][colour]
    return render_digit(glyph, rgb=rgb, size=digits.IMAGE_SIDE, colour_target="background")


def ensure_fix_folder(paths: AppPaths | None = None, ctx: JobContext | None = None) -> DemoExtra:
    from ..analyses.model_diff.synthetic_digits import glyph_pool

    ctx = ctx or null_context()
    folder = fix_folder_dir(paths)
    settings = {"affected_classes": ", ".join(FIX_AFFECTED), "data": "augment"}  # runs without an editor
    if digits._is_current(folder, "fix-folder") and all((folder / s).is_dir() for s in ("train", "affected", "rest")):
        return DemoExtra("fix-folder", folder, True, settings=settings, summary=_fix_summary(folder))
    tmp = digits._fresh_temp(folder)
    try:
        counts = {"train": 0, "affected": 0, "rest": 0}
        affected = {digits.CLASS_NAMES.index(n) for n in FIX_AFFECTED}

        def save(split: str, label: int, name: str, image) -> None:
            d = tmp / split / digits.CLASS_NAMES[label]
            d.mkdir(parents=True, exist_ok=True)
            image.save(d / name, optimize=False)
            counts[split] += 1

        train_glyphs, train_labels = glyph_pool("train")
        rng = np.random.default_rng(digits.SEED)
        for label in range(len(digits.CLASS_NAMES)):
            ctx.progress("Writing the fix folder", label, len(digits.CLASS_NAMES) + 1)
            ctx.check_cancelled()
            picked = rng.permutation(np.flatnonzero(train_labels == label))[:FIX_TRAIN_PER_CLASS]
            for n, i in enumerate(picked):
                cause = n % FIX_CAUSE_EVERY == 0
                save("train", label, f"train-{int(i):04d}{'-blue' if cause else ''}.png",
                     _draw(train_glyphs[i], FIX_CAUSE_COLOUR if cause else None))
        eval_glyphs, eval_labels = glyph_pool("eval")
        for i, (glyph, label) in enumerate(zip(eval_glyphs, eval_labels)):
            label = int(label)
            if label in affected:
                save("affected", label, f"digit-{i:04d}-blue.png", _draw(glyph, FIX_CAUSE_COLOUR))
            else:
                save("rest", label, f"digit-{i:04d}.png", _draw(glyph, None))
        digits._write_manifest(tmp, {"kind": "fix-folder", "affected_classes": list(FIX_AFFECTED),
                                     "cause": f"digits on a {FIX_CAUSE_COLOUR} background", **counts})
        digits._replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ctx.progress("Writing the fix folder", 1, 1)
    return DemoExtra("fix-folder", folder, False, settings=settings, summary=_fix_summary(folder))


def _fix_summary(folder: Path) -> str:
    m = digits._read_manifest(folder)
    return (f"{folder}: {m.get('train', 0)} training digits, {m.get('affected', 0)} affected "
            f"({', '.join(m.get('affected_classes', []))} on a {FIX_CAUSE_COLOUR} background), "
            f"{m.get('rest', 0)} others")
