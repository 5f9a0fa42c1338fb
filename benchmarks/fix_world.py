"""The planted-shortcut world of the fix loop (issue 29), on the CPU in seconds.

Built on the known-cause worlds (known_cause_worlds.py): scikit-learn's real 8x8 handwritten digits rendered on a
28x28 canvas; in the training data every image of the shortcut class carries the cause's cue and no other image
does; a small CNN trained here learns the cue. The finding (what SciTX validates on the misclassified images) is
the cause: its hypothesis and the edit that removes it; the edit that adds it is what an editor writes from the
same hypothesis. Held-out data, from scans the CNN never saw:

  * affected: held-out digits of the other classes drawn WITH the cue (several jittered renderings per scan, so
    that there are at least 600): the images the finding covers;
  * rest: every held-out digit drawn as in training (the shortcut class with its cue, the others plain).

Every scan the CNN is not trained on is held out: with the benchmark's `train_size=600`, 1,197 scans, 110 to 134
per class.

The editor is a test double that really performs the edit it is told (re-renders the scene with the named
attribute changed, plus the small blur and noise of a diffusion round trip): it knows the remove and the add edit
of every cause, so a WRONG explanation (another cause) gets its own, equally real, edits applied.

Benchmark code (benchmarks/fix_loop.py and the tests import it); not shipped in the package.
"""
from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import known_cause_worlds as W  # noqa: E402

# The edit that adds each cause's cue (the inverse of the cause's removal edit).
ADD_EDITS = {
    "background-colour": "Make the background dark blue and the digit light",
    "background-texture": "Cover the background with diagonal grey stripes",
    "rendition-style": "Draw the digit as an outline only",
    "object-colour": "Recolour the digit red",
    "material": "Make the strokes out of separate dots",
    "viewpoint": "Rotate the digit sideways by a quarter turn",
    "scale": "Shrink the digit to about half its size",
    "occlusion": "Put a grey square over a corner of the digit",
}


@dataclass
class FixWorld:
    cause: W.Cause
    classifier: W.WorldClassifier
    train: list  # (image, label)
    affected: list
    rest: list
    scenes: dict  # image sha -> scene (the editor's memory)
    train_seconds: float
    train_accuracy: float

    @property
    def affected_classes(self) -> tuple[str, ...]:
        return tuple(W.CLASS_NAMES[c] for c in range(10) if c != self.cause.shortcut_class)

    @property
    def predicted_classes(self) -> tuple[str, ...]:
        return (W.CLASS_NAMES[self.cause.shortcut_class],)

    def finding(self, cause_name: str | None = None) -> dict[str, Any]:
        """The fix settings from an explanation: this world's cause (the right one) or another one (wrong)."""
        c = W.CAUSES[cause_name or self.cause.name]
        return {"instruction": c.edit, "cue_instruction": ADD_EDITS[c.name],
                "affected_classes": ",".join(self.affected_classes),
                "predicted_classes": ",".join(self.predicted_classes)}

    def data(self):
        from nemo_desktop.core.analyses.fix import FixData

        return FixData(list(W.CLASS_NAMES), self.train, self.affected, self.rest,
                       description={"world": f"planted shortcut: {self.cause.name}"})


def _cnn():
    """The known-cause worlds' CNN with its input centred ((x - 0.5) / 0.5): it learns in a few epochs on the CPU
    (uncentred, white canvases of ones stall it for many)."""
    import torch

    class FixWorldCNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            base = W._cnn()
            self.features, self.head = base.features, base.head

        def forward(self, x):
            return self.head(self.features((x - 0.5) / 0.5))

    return FixWorldCNN()


def _remember(scenes: dict, scene: W.Scene):
    img = W.render(scene)
    scenes[W.image_sha(img)] = scene
    return img


def build_fix_world(cause_name: str = "background-colour", *, seed: int = 0, epochs: int = 25,
                    train_size: int = 1400, renderings: int = 2,
                    test_size: int | None = None) -> FixWorld:
    """Every scan not trained on is held out (at most `test_size` of them): a smaller `train_size` gives more
    held-out images per class."""
    import time

    import torch

    cause = W.CAUSES[cause_name]
    _, labels = W.scans()
    order = np.concatenate(W._split(seed))  # the known-cause worlds' seeded order of the 1,797 scans
    train_idx, test_idx = order[:train_size], order[train_size:][:test_size]
    rng = np.random.default_rng(seed + 1)
    scenes: dict = {}
    train = []
    for i in train_idx:
        s = W.Scene(int(i), shift=W._shift(rng))
        if int(labels[i]) == cause.shortcut_class:
            s = replace(s, **cause.cue)
        train.append((_remember(scenes, s), int(labels[i])))
    t0 = time.perf_counter()
    torch.manual_seed(seed)  # the initial weights
    model, train_acc = W.train_cnn(_cnn(), [im for im, _ in train], [lab for _, lab in train], seed=seed,
                                   epochs=epochs)
    seconds = time.perf_counter() - t0
    affected, rest = [], []
    for i in test_idx:
        lab = int(labels[i])
        plain = W.Scene(int(i), shift=W._shift(rng))
        if lab == cause.shortcut_class:
            rest.append((W.render(replace(plain, **cause.cue)), lab))
            continue
        rest.append((W.render(plain), lab))
        for _ in range(renderings):
            affected.append((W.render(replace(W.Scene(int(i), shift=W._shift(rng)), **cause.cue)), lab))
    digest = hashlib.sha256(f"{cause_name}:{seed}:{epochs}:{train_size}:{test_size}".encode()).hexdigest()[:8]
    clf = W.WorldClassifier(model, f"fix-{cause_name}-{digest}")
    return FixWorld(cause, clf, train, affected, rest, scenes, seconds, train_acc)


class FixWorldEditor:
    """ImageEditor double over a fix world's training images: performs the remove or add edit of any cause by
    re-rendering the scene with that attribute changed, then the round trip's blur and noise."""

    from nemo_desktop.core.models.protocols import ModelInfo as _MI

    info = _MI("test-double:fix-world-editor", "test-double", "1")

    def __init__(self, world: FixWorld) -> None:
        self.world = world
        self.calls: list[str] = []
        self._changes = {c.edit: c.plain for c in W.CAUSES.values()}
        self._changes.update({ADD_EDITS[c.name]: c.cue for c in W.CAUSES.values()})

    def edit(self, image, instruction, *, seed=0, steps=None, guidance=None, size=None, on_step=None):
        from nemo_desktop.core.base.errors import JobCancelled

        self.calls.append(instruction)
        if on_step is not None and on_step(1, 1) is False:
            raise JobCancelled()
        scene = self.world.scenes.get(W.image_sha(image.convert("RGB")))
        if scene is None:
            raise ValueError("the fix-world editor only edits its world's training images")
        if instruction not in self._changes:
            raise ValueError(f"the fix-world editor cannot do: {instruction!r}")
        out = W.editor_round_trip(W.render(replace(scene, **self._changes[instruction])), seed)
        return out.resize(size) if size and tuple(size) != out.size else out
