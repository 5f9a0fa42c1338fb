"""Tiny benchmark datasets in the real folder layouts, and honest test doubles (test code, never shipped).

Every image is 32x32 with two rows of three flat 8x8 blocks. The top row spells, in grey levels, the
ImageNet-1k index the coded classifier double "sees" (it predicts exactly that index); the bottom row spells
the image's true ImageNet index. Flat blocks survive JPEG, so the code is read back exactly from .jpg files
too. The editor double's "restore" edit copies the bottom row onto the top row, so a hypothesis that leads to
that edit really fixes the prediction (positive CEI), and any other edit changes nothing.

The MLLM double does not reason: it answers SciTX's prompts with scripted JSON. The judge doubles answer
LLM Match prompts in deliberately messy formats, and one of them never gives a readable score for
explanations that mention 'garbage'.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from nemo_desktop.core.base.resources import resource_path
from nemo_desktop.core.models.protocols import ModelInfo
from nemo_desktop.core.models.vocab import load_vocabulary

SIDE = 32
BLOCK = 8


# ---------------------------------------------------------------------------------------------- images
def coded_image(seen: int, true: int, tint: int = 0) -> Image.Image:
    arr = np.full((SIDE, SIDE, 3), 255, np.uint8)
    arr[..., 2] = 200 + (tint % 50)  # background tint varies the images (and their embeddings)
    for row, value in ((0, seen), (2, true)):
        digits = (value // 100, value // 10 % 10, value % 10)
        for k, d in enumerate(digits):
            arr[row * BLOCK:(row + 1) * BLOCK, k * BLOCK:(k + 1) * BLOCK, :] = 10 + 25 * d
    return Image.fromarray(arr, "RGB")


def read_code(img: Image.Image, row: int) -> int:
    arr = np.asarray(img.convert("RGB").resize((SIDE, SIDE), Image.NEAREST), dtype=np.float64)
    digits = []
    for k in range(3):
        block = arr[row * BLOCK + 2:(row + 1) * BLOCK - 2, k * BLOCK + 2:(k + 1) * BLOCK - 2, 0]
        digits.append(int(np.clip(round((block.mean() - 10) / 25), 0, 9)))
    return digits[0] * 100 + digits[1] * 10 + digits[2]


def save(img: Image.Image, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in (".jpg", ".jpeg"):
        img.save(path, quality=95)
    else:
        img.save(path)
    return path


# ------------------------------------------------------------------------------------ dataset layouts
def make_imagenet_r(root: Path, *, classes: int = 4, per_class: int = 4, wrong: int = 2) -> dict:
    """imagenet-r/<wnid>/<style>_<i>.jpg; `wrong` images per class are seen as the next R class."""
    vocab = load_vocabulary("imagenet-r")
    base = root / "imagenet-r"
    expected_wrong = []
    for c in range(classes):
        true = vocab.imagenet_indices[c][0]
        for i in range(per_class):
            seen = vocab.imagenet_indices[(c + 1) % 200][0] if i < wrong else true
            rel = f"{vocab.wnids[c]}/{('art', 'cartoon', 'sketch', 'toy')[i % 4]}_{i}.jpg"
            save(coded_image(seen, true, tint=c * 7 + i), base / rel)
            if i < wrong:
                expected_wrong.append(rel)
    (base / "README.txt").write_text("not an image")  # stray files are ignored
    return {"root": base, "wrong": sorted(expected_wrong), "total": classes * per_class}


def make_objectnet(root: Path) -> dict:
    """objectnet-1.0/images/<folder>/<hash>.png, with a non-overlap class folder that must be skipped."""
    vocab = load_vocabulary("objectnet")
    all_folders = json.loads(resource_path("benchmarks", "objectnet", "folder_to_objectnet_label.json").read_text())
    other = next(f for f in sorted(all_folders) if f not in vocab.folders)
    base = root / "objectnet-1.0"
    (base / "mappings").mkdir(parents=True)
    alarm = vocab.folders.index("alarm_clock")  # ImageNet 409 (analog clock) and 530 (digital clock)
    chair = vocab.folders.index("chair")
    plan = [  # (class, seen ImageNet index, correct?)
        (alarm, 409, True), (alarm, 530, True), (alarm, 423, False), (alarm, 0, True),  # tench (0) is masked
        (chair, vocab.imagenet_indices[chair][0], True), (chair, 409, False), (chair, 530, False),
    ]
    wrong = []
    for i, (c, seen, ok) in enumerate(plan):
        rel = f"{vocab.folders[c]}/{i:08x}.png"
        save(coded_image(seen, vocab.imagenet_indices[c][0], tint=i), base / "images" / rel)
        if not ok:
            wrong.append(rel)
    save(coded_image(1, 1), base / "images" / other / "0.png")
    return {"root": base, "wrong": sorted(wrong), "masked_row": f"{vocab.folders[alarm]}/00000003.png",
            "other": other}


def make_imagenet_d(root: Path) -> dict:
    """ImageNet-D/{background,texture,material}/<folder>/<i>.jpg."""
    vocab = load_vocabulary("imagenet-d")
    chair = vocab.folders.index("chair")  # 423, 559, 765
    backpack = vocab.folders.index("backpack")  # 414
    base = root / "ImageNet-D"
    wrong = []
    plan = [("background", chair, 765, True), ("background", chair, 0, False), ("texture", chair, 423, True),
            ("texture", backpack, 414, True), ("texture", backpack, 765, False), ("material", backpack, 559, False),
            ("material", chair, 559, True)]
    for i, (split, c, seen, ok) in enumerate(plan):
        rel = f"{split}/{vocab.folders[c]}/{i}.jpg"
        save(coded_image(seen, vocab.imagenet_indices[c][0], tint=i), base / rel)
        if not ok:
            wrong.append(rel)
    return {"root": base, "wrong": sorted(wrong)}


def make_imagenet_val(root: Path, wnids: list[str], per_class: int = 2) -> Path:
    """val/<wnid>/ILSVRC2012_val_<n>.JPEG, all correctly 'seen'."""
    vocab = load_vocabulary("imagenet-1k")
    n = 0
    for w in wnids:
        i = vocab.wnids.index(w)
        for _ in range(per_class):
            n += 1
            save(coded_image(i, i, tint=n), root / "val" / w / f"ILSVRC2012_val_{n:08d}.JPEG")
    return root / "val"


# --------------------------------------------------------------------------------------- classifiers
class CodedImageNetClassifier:
    """Classifier-protocol double with ImageNet-1k's 1000 classes: logit 8 at the index the image's top row
    spells, 4 at the true index (bottom row; the runner-up that masking can bring to the top), 0 elsewhere.
    Counts images it classifies."""

    zero_shot = False

    def __init__(self) -> None:
        self.class_names = list(load_vocabulary("imagenet-1k").names)
        self.info = ModelInfo("test-double:coded-imagenet", "test-double", "1")
        self.images_seen = 0

    def logits(self, images):
        out = np.zeros((len(images), 1000), np.float32)
        for r, im in enumerate(images):
            out[r, read_code(im, 2)] = 4.0
            out[r, read_code(im, 0)] = 8.0
        self.images_seen += len(images)
        return out

    def predict_proba(self, images, *, class_prompts=None):
        if class_prompts:
            raise ValueError("not a zero-shot classifier")
        z = self.logits(images)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)

    def embed(self, images):
        out = np.stack([np.asarray(im.convert("RGB").resize((4, 4))).reshape(-1).astype(np.float32) + 1.0
                        for im in images])
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def preprocess(self, images):
        raise NotImplementedError("not needed by SciTX")

    def forward_logits(self, pixel_values):
        raise NotImplementedError("not needed by SciTX")


class CodedZeroShot:
    """Zero-shot double: maps the seen ImageNet index to its class in the current vocabulary (the benchmark
    whose names it was given); a class prompt that mentions 'style' gets +10 on its logit."""

    zero_shot = True

    def __init__(self) -> None:
        self.info = ModelInfo("test-double:coded-zero-shot", "test-double", "1")
        self.class_names = list(load_vocabulary("imagenet-1k").names)
        self.vocab = load_vocabulary("imagenet-1k")

    def set_class_names(self, names):
        self.class_names = list(names)
        for v in ("imagenet-r", "objectnet", "imagenet-d", "imagenet-1k"):
            voc = load_vocabulary(v)
            if list(voc.names) == self.class_names:
                self.vocab = voc

    def class_prompt(self, index):
        return f"a photo of a {self.class_names[index]}."

    def predict_proba(self, images, *, class_prompts=None):
        rows = []
        for im in images:
            z = np.zeros(len(self.class_names))
            c = self.vocab.from_imagenet_index(read_code(im, 0))
            z[0 if c is None else c] += 6.0
            for i, prompt in (class_prompts or {}).items():
                if "style" in prompt:
                    z[i] += 10.0
            e = np.exp(z - z.max())
            rows.append(e / e.sum())
        return np.asarray(rows, np.float32)

    def embed(self, images):
        return CodedImageNetClassifier.embed(self, images)

    def preprocess(self, images):
        raise NotImplementedError

    def forward_logits(self, pixel_values):
        raise NotImplementedError


# ---------------------------------------------------------------------------------- MLLM and editor
HYPOTHESES = ["The object is shown as a cartoon rendition with an unusual background, unlike the photos of its "
              "class.", "The object is partly hidden by another object.", "The lighting is too dark."]


class ScriptedMLLM:
    """MultimodalLLM double for SciTX's prompts. `delay` seconds per call (to kill a run mid-way);
    `log` appends one line per call to a file (to count calls across processes)."""

    def __init__(self, name: str = "scripted", delay: float = 0.0, log: str | None = None) -> None:
        self.info = ModelInfo(f"test-double:{name}", "test-double", "1")
        self.delay, self.log, self.calls = delay, log, 0

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        text = "\n".join(p for m in messages for p in m.content if isinstance(p, str))
        if self.log:  # one JSON line per call: which process asked what about which images
            import hashlib

            images = [hashlib.sha256(p.tobytes()).hexdigest()[:16] for m in messages for p in m.content
                      if isinstance(p, Image.Image)]
            line = {"pid": os.getpid(), "prompt": hashlib.sha256(text.encode()).hexdigest()[:16], "images": images,
                    "temperature": temperature, "seed": seed}
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
                f.flush()
                os.fsync(f.fileno())
        if "cause_of_error" in text:
            pick = 0 if temperature == 0 else int(seed) % len(HYPOTHESES)
            return "```json\n" + json.dumps({"cause_of_error": HYPOTHESES[pick]}) + "\n```"
        if "editing prompt" in text:
            hyp = re.search(r"Hypothesis for Misclassification:\*\* (.*)", text).group(1)
            sol = "Restore the photo appearance" if "cartoon" in hyp else "Brighten the image"
            return json.dumps({"reasoning": "It removes the cause.", "solution": sol})
        if "Original Failed Prompt" in text:
            hyp = re.search(r"Specific Hypothesis:\*\* (.*)", text).group(1)
            sol = "a photo of a thing in a cartoon style" if "cartoon" in hyp else "a dark photo of a thing"
            return json.dumps({"reasoning": "It names the cue.", "solution": sol})
        return "A flat grey pattern on a light background."

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


class RestoringEditor:
    """ImageEditor double: 'restore' copies the true code (bottom row) onto the seen code (top row)."""

    def __init__(self, name: str = "restoring") -> None:
        self.info = ModelInfo(f"test-double:{name}", "test-double", "1")
        self.calls = 0

    def edit(self, image, instruction, *, seed=0, steps=None, guidance=None, size=None, on_step=None):
        self.calls += 1
        total = steps or 2
        for i in range(1, total + 1):
            if on_step is not None and on_step(i, total) is False:
                from nemo_desktop.core.base.errors import JobCancelled

                raise JobCancelled()
        arr = np.asarray(image.convert("RGB").resize((SIDE, SIDE), Image.NEAREST)).copy()
        if "restore" in instruction.lower():
            arr[0:BLOCK] = arr[2 * BLOCK:3 * BLOCK]
        else:
            arr[BLOCK:2 * BLOCK] = 255 - arr[BLOCK:2 * BLOCK]  # a visible change that leaves the codes alone
        out = Image.fromarray(arr, "RGB")
        return out.resize(size, Image.NEAREST) if size and tuple(size) != out.size else out


# -------------------------------------------------------------------------------------------- judges
class MessyJudge:
    """LLM Match judge double: scores 1.0 if the explanation names a rendition or background, 0.5 for
    occlusion, else 0.0, in the reply style `style`: 'fenced', 'fraction' (prose + '0.5/1') or 'stubborn'
    (never a readable score for explanations containing 'garbage'; otherwise fenced JSON)."""

    def __init__(self, name: str, style: str, delay: float = 0.0) -> None:
        self.info = ModelInfo(f"test-double:judge-{name}", "test-double", "1")
        self.style, self.delay, self.calls = style, delay, 0

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        text = messages[0].content[0]
        expl = text.split("<<<")[1].split(">>>")[0].lower()
        score = 1.0 if ("cartoon" in expl or "background" in expl) else 0.5 if "hidden" in expl else 0.0
        if self.style == "stubborn" and "garbage" in expl:
            return "I would rather not say."
        if self.style == "fraction":
            return f"The explanation is about the factor. Score: {score}/1"
        return "Here is my verdict:\n```json\n" + json.dumps({"reasoning": "checked", "score": score}) + "\n```"

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


# ------------------------------------------------------------------ doubles behind the model registry
FAMILY = "test-double"


def load_double(spec, options=None):
    """Registry loader for the doubles: `test-double:<what>` with <what> = coded-imagenet, coded-zero-shot,
    scripted, restoring, or judge-<name>-<style>; spec.options may set delay (s) and log (a file)."""
    what = spec.source
    opts = dict(spec.options or {})
    if what == "coded-imagenet":
        return CodedImageNetClassifier()
    if what == "coded-zero-shot":
        return CodedZeroShot()
    if what.startswith("scripted"):
        return ScriptedMLLM(what, delay=float(opts.get("delay", 0.0)), log=opts.get("log"))
    if what.startswith("restoring"):
        return RestoringEditor(what)
    if what.startswith("judge-"):
        _, name, style = what.split("-")
        return MessyJudge(name, style, delay=float(opts.get("delay", 0.0)))
    raise ValueError(f"unknown test double {what!r}")


def families() -> dict:
    """(kind, family) -> loader, for monkeypatching the model registry (or registering in a child process)."""
    return {(kind, FAMILY): load_double for kind in ("classifier", "mllm", "editor")}


# ------------------------------------------------------------------------------------- method double
@dataclass
class FixedConfig:
    bias: float = 0.0
    validate: bool = False
    class_relevance: bool = True
    seed: int = 0
    fail_on: str = ""  # a sample path containing this -> a NemoError (a final failure)
    flaky_on: str = ""  # a sample path containing this -> RuntimeError while `flaky_marker` does not exist
    flaky_marker: str = ""
    delay: float = 0.0  # seconds per sample, standing in for a model's time (sleeps: no CPU)


class FixedExplainer:
    """Explanation-method double with a known answer: CEI = bias + 10*validate + 2*class_relevance
    + 1 (MLLM label ends in B) + 0.5 (editor label ends in 2). It does not store its result (the runner
    must). Registered as method 'fixed' by the tests that use it."""

    def __init__(self, classifier, mllm, editor=None, store=None, reference=None, config=None):
        self.classifier, self.mllm, self.editor = classifier, mllm, editor
        self.config = config or FixedConfig()
        self.calls = 0

    def expected_cei(self) -> float:
        c = self.config
        return (c.bias + 10 * c.validate + 2 * c.class_relevance
                + (1.0 if self.mllm is not None and self.mllm.info.model_id.endswith("B") else 0.0)
                + (0.5 if self.editor is not None and self.editor.info.model_id.endswith("2") else 0.0))

    def __call__(self, image, true_label, ctx=None):
        from nemo_desktop.core.base.errors import NemoError
        from nemo_desktop.core.base.records import ExplanationResult, SampleInfo
        from nemo_desktop.core.store import content_hash

        self.calls += 1
        c, path = self.config, str(image)
        if c.delay:
            time.sleep(c.delay)
        if c.fail_on and c.fail_on in path:
            raise NemoError("The classifier predicts the true class for this image.")
        if c.flaky_on and c.flaky_on in path and not os.path.exists(c.flaky_marker):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        names = self.classifier.class_names
        sample = SampleInfo(path, content_hash(path), int(true_label), names[int(true_label)], 0, names[0], 0.1, 0.5)
        text = "The unusual background misleads the model." if c.validate else "The object is hidden by a cup."
        return ExplanationResult("fixed", sample, explanation=text, cei=self.expected_cei(),
                                 manifest={"complete": True, "config": asdict(c)}, timings={"explain": 0.001})


def doubles_loader(made: dict | None = None):
    """A runner loader that builds the doubles a config names (test-double:<what>) and keeps them by label."""
    made = made if made is not None else {}

    from nemo_desktop.core.models.families import ModelSpec

    def load(ref):
        r = ref.ref
        spec = ModelSpec(ref.kind, FAMILY, r.split(":", 1)[1]) if isinstance(r, str) else \
            ModelSpec(ref.kind, r["family"], r["source"], options=dict(r.get("options") or {}))
        if spec.family == FAMILY:
            obj = load_double(spec)
        else:  # a real adapter (e.g. openai-compatible against a loopback server)
            from nemo_desktop.core.models.families import LoadOptions, load_model

            obj = load_model(spec, LoadOptions(device="cpu"))
        made.setdefault(ref.label, []).append(obj)
        return obj

    return load


def base_config(data: dict, **over) -> dict:
    cfg = {
        "name": "tiny",
        "seed": 3,
        "samples_per_dataset": 2,
        "imagenet_subset": {"root": str(data["val"]), "classes": "mini-imagenet"},
        "datasets": [{"kind": "imagenet-r", "root": str(data["imagenet-r"]["root"])},
                     {"kind": "objectnet", "root": str(data["objectnet"]["root"])},
                     {"kind": "imagenet-d", "root": str(data["imagenet-d"]["root"])}],
        "classifiers": {"ViT": "test-double:coded-imagenet", "CLIP": "test-double:coded-zero-shot"},
        "mllms": {"Qwen": "test-double:scripted"},
        "editors": {"Kontext": "test-double:restoring"},
        "methods": [{"label": "SciTX", "method": "scitx",
                     "options": {"k": 1, "m": 2, "edit_steps": 1, "thumbnail_side": 16}}],
        "judges": {"GPT": "test-double:judge-gpt-fenced", "Claude": "test-double:judge-claude-fraction",
                   "Gemini": "test-double:judge-gemini-stubborn"},
    }
    cfg.update(over)
    return cfg


def register_doubles() -> None:
    """In a worker process (a Ray actor): the model doubles as family 'test-double' and FixedExplainer as
    method 'fixed', as the `registered` and `fixed_method` fixtures do in the test process."""
    from nemo_desktop.core.models import families as models
    from nemo_desktop.core.registry import AnalysisSpec, Inputs, list_analyses
    from nemo_desktop.core.registry import registry

    models._ensure_builtin_families()
    for (kind, family), loader in families().items():
        models.register_family(kind, family)(loader)
    list_analyses()
    registry._SPECS["fixed"] = AnalysisSpec("fixed", "sample", "test", FixedExplainer, FixedConfig,
                                            inputs=Inputs(mllm="optional", editor="optional"),
                                            description="test double")
