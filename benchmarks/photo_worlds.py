"""Known-cause worlds made of real photographs (issue 45): the drawn-digit worlds (known_cause_worlds.py) with
photograph patches instead of digits, so that SciTX's evidence rule is measured on textured natural images.

The two photographs that ship with scikit-learn (`load_sample_images`: a temple by a lake, a dahlia) give six
classes of patch: sky, pagoda, lake, trees (the first), petals and foliage (the second). An image is a 42-px
crop of its class's region, at a position drawn per scene and flipped or not, shown in grey at 28 px (in colour
the regions differ at a glance and no cue is ever taken over content). As in the digit
worlds, every training image of one class (the shortcut class) carries the world's cue and no other does, a
small CNN learns the cue, and a held-out patch of another class shown with the cue and taken for the shortcut
class is a sample when removing the cue exactly raises P(true) by at least 10 points and the editor's round trip
alone moves P(true) by at most the noise floor.

Six mechanisms; the first three are the *development* half (where a threshold may be looked at), the other
three the *held-out* half (figures only):

    texture     diagonal grey stripes over the picture                  development
    blur        the picture blurred (an image-quality cause)            development
    occlusion   a grey square over a corner                             development
    colour      an orange tint over the (grey) picture                  held out
    pixelation  the picture pixelated in 4-px blocks (image quality)    held out
    noise       strong grain noise (image quality)                      held out

The MLLM and the editor are doubles, as in the digit worlds: the MLLM answers from a pool (the true cause and
two other causes' hypotheses), the editor re-renders the scene with the named attribute restored and adds a
diffusion round trip's blur and noise. Adversarial editors: colour noise; the picture kept with a patch of the
true class pasted into its lower left quarter; a patch of the true class blended half over the whole picture; a
no-op; the picture replaced by another patch of the true class. They misbehave on the reference images too (the
reference control, core/methods/edit_control.py, applies the same editor to references: `reference_scenes`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

import numpy as np
from PIL import Image, ImageFilter

import known_cause_worlds as W

SIDE = 28  # what the CNN sees
CROP = 42  # px of the photograph per image
CLASS_NAMES = ["sky", "pagoda", "lake", "trees", "petals", "foliage"]
# (photo, top, left, bottom, right) of each class's region in scikit-learn's china.jpg (0) and flower.jpg (1)
REGIONS = [(0, 0, 380, 70, 640), (0, 60, 100, 330, 330), (0, 220, 390, 290, 560), (0, 300, 400, 427, 640),
           (1, 95, 180, 320, 430), (1, 0, 0, 160, 170)]
OCCLUDER = (120, 120, 120)
STRIPE = (150, 150, 150)
HALVES = {"development": ("texture", "blur", "occlusion"), "held out": ("colour", "pixelation", "noise")}


@dataclass(frozen=True)
class PhotoScene:
    cls: int
    y: int  # crop offset inside the region
    x: int
    flip: bool = False
    stripes: bool = False
    swap: bool = False
    occluder: bool = False
    blur: bool = False
    pixel: bool = False
    noise: bool = False
    thickness: int = 0  # unused here; the distractor edit of the digit worlds needs the field


@dataclass(frozen=True)
class PhotoCause:
    name: str
    shortcut_class: int
    cue: dict
    hypothesis: str
    edit: str
    plain: dict


CAUSES: dict[str, PhotoCause] = {c.name: c for c in [
    PhotoCause("texture", 4, {"stripes": True},
               "Diagonal grey stripes cover the picture, a texture the references do not have.",
               "Remove the diagonal stripes", {"stripes": False}),
    PhotoCause("blur", 3, {"blur": True},
               "The picture is blurred, while the references are sharp.",
               "Sharpen the picture so that it is in focus", {"blur": False}),
    PhotoCause("occlusion", 2, {"occluder": True},
               "A grey square covers a corner of the picture, clutter that the references do not have.",
               "Remove the grey square", {"occluder": False}),
    PhotoCause("colour", 5, {"swap": True},
               "The picture is tinted orange, while the references are in neutral grey.",
               "Remove the orange tint so that the picture is neutral grey", {"swap": False}),
    PhotoCause("pixelation", 1, {"pixel": True},
               "The picture is pixelated into coarse blocks, unlike the references.",
               "Remove the pixelation", {"pixel": False}),
    PhotoCause("noise", 0, {"noise": True},
               "The picture is covered in strong grain noise that the references do not have.",
               "Remove the grain noise", {"noise": False}),
]}
CAUSAL_MIN_RISE = W.CAUSAL_MIN_RISE
ADVERSARIES = W.ADVERSARIES
TARGET_ADVERSARIES = W.TARGET_ADVERSARIES

_PHOTOS: list[np.ndarray] | None = None


def photos() -> list[np.ndarray]:
    global _PHOTOS
    if _PHOTOS is None:
        from sklearn.datasets import load_sample_images

        _PHOTOS = list(load_sample_images().images)
    return _PHOTOS


def _crop(cls: int, y: int, x: int, flip: bool, side: int = CROP) -> Image.Image:
    k, top, left, _, _ = REGIONS[cls]
    arr = photos()[k][top + y:top + y + side, left + x:left + x + side]
    # grey: the six regions differ by colour at a glance, and a CNN that reads colour would never take a
    # patch of one for another whatever the cue; in grey, content is texture and brightness, as in a hard task
    img = Image.fromarray(arr).convert("L").convert("RGB").resize((SIDE, SIDE), Image.Resampling.BILINEAR)
    return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if flip else img


def render(scene: PhotoScene) -> Image.Image:
    img = _crop(scene.cls, scene.y, scene.x, scene.flip)
    if scene.blur:
        img = img.filter(ImageFilter.GaussianBlur(1.2))
    if scene.pixel:
        img = img.resize((SIDE // 4, SIDE // 4), Image.Resampling.BOX).resize((SIDE, SIDE), Image.Resampling.NEAREST)
    arr = np.asarray(img, dtype=np.float64).copy()
    if scene.swap:  # a warm tint over the grey picture
        arr = arr * np.array([1.0, 0.55, 0.3]) + np.array([70.0, 20.0, 0.0])
    if scene.stripes:
        yy, xx = np.mgrid[:SIDE, :SIDE]
        arr[((xx + yy) % 6) < 2] = STRIPE
    if scene.noise:  # the same grain for the same scene
        seed = (scene.cls * 1_000_003 + scene.y * 1009 + scene.x * 7 + int(scene.flip)) % (2 ** 32)
        arr = arr + np.random.default_rng(seed).normal(0, 40, arr.shape)
    if scene.occluder:
        arr[2:12, 16:26] = OCCLUDER
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")


def _random_scene(cls: int, rng: np.random.Generator) -> PhotoScene:
    _, top, left, bottom, right = REGIONS[cls]
    return PhotoScene(cls, int(rng.integers(0, bottom - top - CROP + 1)), int(rng.integers(0, right - left - CROP + 1)),
                      bool(rng.integers(0, 2)))


@dataclass
class PhotoWorld:
    cause: PhotoCause
    classifier: W.WorldClassifier
    train_accuracy: float
    samples: list[W.Sample] = field(default_factory=list)
    n_test: int = 0
    not_causal: int = 0
    unstable: int = 0
    scenes: dict[str, PhotoScene] = field(default_factory=dict)

    def remember(self, scene: PhotoScene) -> Image.Image:
        img = render(scene)
        self.scenes[W.image_sha(img)] = scene
        return img


def build_world(cause_name: str, *, seed: int = 0, epochs: int = 12, per_class: int = 160, test_per_class: int = 60,
                max_samples: int | None = None) -> PhotoWorld:
    """Train the world's CNN on `per_class` patches of each class and collect its samples."""
    import torch

    cause = CAUSES[cause_name]
    rng = np.random.default_rng(seed)
    train, labels = [], []
    for cls in range(len(CLASS_NAMES)):
        for _ in range(per_class):
            s = _random_scene(cls, rng)
            train.append(replace(s, **cause.cue) if cls == cause.shortcut_class else s)
            labels.append(cls)
    with W.pinned_torch():
        torch.manual_seed(seed)
        model = W._cnn()
        model.head = torch.nn.Linear(64, len(CLASS_NAMES))
        model, acc = W.train_cnn(model, [render(s) for s in train], labels, seed=seed, epochs=epochs)
    clf = W.WorldClassifier(model, f"photo-{cause.name}")
    clf.class_names = list(CLASS_NAMES)
    world = PhotoWorld(cause, clf, acc)
    tests = [replace(_random_scene(cls, rng), **cause.cue) for cls in range(len(CLASS_NAMES))
             if cls != cause.shortcut_class for _ in range(test_per_class)]
    world.n_test = len(tests)
    imgs = [render(s) for s in tests]
    probs = clf.predict_proba(imgs)
    plain = clf.predict_proba([render(replace(s, **cause.plain)) for s in tests])
    others = [c for c in CAUSES if c != cause.name]
    for scene, img, p, q in zip(tests, imgs, probs, plain):
        if int(p.argmax()) != cause.shortcut_class:
            continue
        y = scene.cls
        if q[y] - p[y] < CAUSAL_MIN_RISE:
            world.not_causal += 1
            continue
        trips = clf.predict_proba([W.editor_round_trip(img, t) for t in range(W.ROUND_TRIP_SEEDS)])
        if float(np.max(np.abs(trips[:, y] - p[y]))) > W.ROUND_TRIP_MAX_MOVE:
            world.unstable += 1
            continue
        k = len(world.samples)
        first, second = (CAUSES[others[(k + i) % len(others)]] for i in (0, 2))
        pool = [cause.hypothesis, first.hypothesis, second.hypothesis]
        r = k % 3
        world.samples.append(W.Sample(scene, y, world.remember(scene), pool[r:] + pool[:r]))  # type: ignore[arg-type]
        if max_samples is not None and len(world.samples) >= max_samples:
            break
    return world


def instruction_for(hypothesis: str) -> str:
    for c in CAUSES.values():
        if c.hypothesis == hypothesis:
            return c.edit
    return "Leave the image as it is"


class ScriptedPhotoMLLM(W.ScriptedWorldMLLM):
    info = W.ScriptedWorldMLLM._MI("test-double:photo-worlds-mllm", "test-double", "1")

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        text = "\n".join(p for m in messages for p in m.content if isinstance(p, str))
        if "cause_of_error" in text:
            return super().chat(messages, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        if "editing prompt" in text:
            hyp = re.search(r"Hypothesis for Misclassification:\*\* (.*)", text).group(1).strip()
            return json.dumps({"reasoning": "It removes the hypothesised cause.", "solution": instruction_for(hyp)})
        return "A patch of a photograph."


class PhotoEditor(W.WorldEditor):
    """Performs the named edit by re-rendering the scene with that attribute restored."""

    info = W.WorldEditor._MI("test-double:photo-worlds-editor", "test-double", "1")

    def legit(self, image: Image.Image, instruction: str, seed: int) -> Image.Image:
        scene = self.world.scenes.get(W.image_sha(image.convert("RGB").resize((SIDE, SIDE))))
        if scene is None:
            raise ValueError("the photo-worlds editor only edits the images of its world")
        change = next((c.plain for c in CAUSES.values() if c.edit == instruction), None)
        if change is None:
            raise ValueError(f"the photo-worlds editor cannot do: {instruction!r}")
        return W.editor_round_trip(render(replace(scene, **change)), seed + len(instruction))


class PhotoAdversarialEditor(PhotoEditor):
    """noise | paste-true-class | no-op | replace-by-true-class on `target` ("all" or one instruction)."""

    def __init__(self, world: PhotoWorld, behaviour: str, target: str = "all", true_class: int | None = None) -> None:
        super().__init__(world)
        if behaviour not in ADVERSARIES:
            raise ValueError(behaviour)
        self.behaviour, self.target, self.true_class = behaviour, target, true_class  # see W.AdversarialEditor
        self.info = replace(PhotoEditor.info, model_id=f"test-double:photo-worlds-editor-{behaviour}")

    def legit(self, image, instruction, seed):
        if self.target != "all" and instruction != self.target:
            return super().legit(image, instruction, seed)
        img = image.convert("RGB").resize((SIDE, SIDE))
        if self.behaviour == "noise":
            rng = np.random.default_rng(seed + 99)
            return Image.fromarray(rng.integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8), "RGB")
        if self.behaviour == "no-op":
            return img.copy()
        scene = self.world.scenes[W.image_sha(img)]
        other = _other_patch(scene, self.true_class)
        if self.behaviour == "paste-true-class":  # the picture, confound and all, with the true class pasted in
            out = img.copy()
            out.paste(render(other).resize((SIDE // 2, SIDE // 2), Image.Resampling.BILINEAR), (0, SIDE // 2))
            return W.editor_round_trip(out, seed)
        if self.behaviour == "overlay-true-class":  # a patch of the true class blended over the whole picture
            return W.editor_round_trip(Image.blend(img, render(other), 0.5), seed)
        return W.editor_round_trip(render(other), seed)


def _other_patch(scene: PhotoScene, cls: int | None = None) -> PhotoScene:
    """A plain patch of class `cls` (default: the scene's own) elsewhere in its region."""
    cls = scene.cls if cls is None else cls
    _, top, left, bottom, right = REGIONS[cls]
    return PhotoScene(cls, (scene.y + 17) % (bottom - top - CROP + 1), (scene.x + 29) % (right - left - CROP + 1),
                      not scene.flip)


def reference_scenes(world: PhotoWorld, per_class: int, seed: int) -> list[tuple[PhotoScene, int]]:
    """Patches drawn as the training data is (the shortcut class with its cue), for the reference index."""
    rng = np.random.default_rng(seed + 1000)
    out = []
    for cls in range(len(CLASS_NAMES)):
        for _ in range(per_class):
            s = _random_scene(cls, rng)
            out.append((replace(s, **world.cause.cue) if cls == world.cause.shortcut_class else s, cls))
    return out


# what benchmarks/known_causes.py needs of a family of worlds
KIT = {"mllm": ScriptedPhotoMLLM, "editor": PhotoEditor, "adversary": PhotoAdversarialEditor,
       "instruction_for": instruction_for, "reference_scenes": reference_scenes}
