"""The digits colour world for failure modes (test code, never shipped).

The CNN of tests/core/methods/digits_world.py learned a colour shortcut (three = red, eight = blue). Here
the held-out digits are rendered in random inks, so red and blue digits of other classes are where it fails.
`MeasuredFactorSpace` is an honest joint space: it *measures* each image (dominant ink colour, stroke
coverage, a fixed projection of the 8x8 downsampled digit) and embeds sentences by their keywords into the
same coordinates; nothing in it knows which images the model got wrong.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from digits_world import CLASS_NAMES, INK, dominant_ink, ink_coverage, render
from nemo_desktop.core.models.protocols import ModelInfo

INKS = tuple(INK)  # red, blue, green, black, orange, purple
_SHAPE = 16
_D = len(INKS) + 1 + _SHAPE + 2  # inks, coverage, shape projection, image offset, text offset


def write_ink_manifest(folder, digits, seed: int = 3):
    """Held-out digits in random inks: PNGs plus manifest.csv (path,label,ink,thickness)."""
    _, (x_test, y_test), _ = digits
    rng = np.random.default_rng(seed)
    coverage = np.array([float((x > 8).mean()) for x in x_test])
    thick_cut = float(np.median(coverage))
    rows = []
    for i, (x, y) in enumerate(zip(x_test, y_test)):
        ink = INKS[int(rng.integers(len(INKS)))]
        p = folder / f"d{i:04d}.png"
        render(x, ink).save(p)
        rows.append((p.name, CLASS_NAMES[int(y)], ink, "thick" if coverage[i] > thick_cut else "thin"))
    manifest = folder / "manifest.csv"
    with open(manifest, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["path", "label", "ink", "thickness"])
        w.writerows(rows)
    return manifest


def sentence_file(path):
    """A user sentence set with 'requires' for attribute relevance."""
    import json

    items = [{"text": f"a digit drawn in {ink} ink", "requires": {"ink": ink}} for ink in INKS]
    items += [{"text": "a thick digit", "requires": {"thickness": "thick"}},
              {"text": "a thin digit", "requires": {"thickness": "thin"}}]
    items += [{"text": f"a handwritten {c}", "requires": {"label": c}} for c in CLASS_NAMES]
    path.write_text(json.dumps({"name": "digits", "version": 1, "sentences": items}))
    return path


@dataclass
class MeasuredFactorSpace:
    """Joint-embedder test double: measured pixels for images, keywords for sentences; counts calls."""

    train_scans: np.ndarray
    train_labels: np.ndarray
    image_calls: int = 0
    images_seen: int = 0
    text_calls: int = 0
    info: ModelInfo = field(default_factory=lambda: ModelInfo("test-double:measured-factors", "test-double", "v1"))

    def __post_init__(self) -> None:
        self._proj = np.random.default_rng(0).standard_normal((64, _SHAPE)) / 8.0
        shapes = np.array([self._shape(render(x, "black")) for x in self.train_scans])
        self._class_shape = {c: shapes[self.train_labels == i].mean(0) for i, c in enumerate(CLASS_NAMES)}

    def fresh(self) -> "MeasuredFactorSpace":
        """The same space with zeroed call counters (without re-measuring the training digits)."""
        import copy

        twin = copy.copy(self)
        twin.image_calls = twin.images_seen = twin.text_calls = 0
        return twin

    def _shape(self, img: Image.Image) -> np.ndarray:
        cov = ink_coverage(img)
        small = np.asarray(Image.fromarray((cov * 255).astype(np.uint8)).resize((8, 8), Image.BILINEAR),
                           np.float64) / 255.0
        v = small.ravel() @ self._proj
        return v / max(np.linalg.norm(v), 1e-9)

    def embed(self, images):
        self.image_calls += 1
        self.images_seen += len(images)
        out = np.zeros((len(images), _D))
        for i, img in enumerate(images):
            ink = dominant_ink(img)
            if ink in INKS:
                out[i, INKS.index(ink)] = 1.5  # colour is as salient to a CLIP-like space as shape
            out[i, len(INKS)] = 4.0 * (float((ink_coverage(img) > 0.5).mean()) - 0.3)
            out[i, len(INKS) + 1:len(INKS) + 1 + _SHAPE] = self._shape(img)
            out[i, -2] = 1.5
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)

    def embed_texts(self, texts):
        self.text_calls += 1
        out = np.zeros((len(texts), _D))
        for i, t in enumerate(texts):
            for k, ink in enumerate(INKS):
                if f" {ink} " in f" {t} ":
                    out[i, k] = 1.0
            if "thick" in t:
                out[i, len(INKS)] = 1.0
            if "thin" in t:
                out[i, len(INKS)] = -1.0
            for c in CLASS_NAMES:
                if t.endswith(f" {c}"):
                    out[i, len(INKS) + 1:len(INKS) + 1 + _SHAPE] = self._class_shape[c]
            out[i, -1] = 1.5
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


class EditWriterMLLM:
    """Writes the edit instruction for a hypothesis (test double: a table from hypothesis words to edits)."""

    info = ModelInfo("test-double:edit-writer", "test-double", "1")

    def __init__(self):
        self.calls = []

    def chat(self, messages, **kw):
        text = "\n".join(p for m in messages for p in m.content if isinstance(p, str))
        self.calls.append(text)
        edit = ("Change the colour of the digit to red" if "blue ink" in text else
                "Make the strokes thicker" if "thick" in text else "Rotate the digit slightly")
        return json.dumps({"reasoning": "The hypothesis names this condition; remove it.", "solution": edit})
