"""A small world with a real spurious cue, for testing SciTX's logic (test code, never shipped).

scikit-learn's bundled handwritten digits (real 8x8 scans) are rendered as 16x16 RGB images: coloured ink
on white. In the training data colour is a shortcut: every "eight" is drawn in blue, half the "threes" in red
and the rest, like the other digits, in green, black, orange, purple or red. A small CNN trained on it for a
few seconds on the CPU relies on the colour, so a "three" drawn in blue is taken for an "eight". Removing the
eight's cue (recolour the digit red) moves the prediction back; thickening the strokes or rotating the digit
does not. (Until issue 45's stop 48 every "three" was red: then "recolour red" also painted the three's own
cue in, which raises P(three) on any digit, and a reference control on six references rightly refused it as
not specific to the image. Measured on this world, 5 epochs: every blue test three is taken for an eight,
97 % of them are threes again in red; 200 other test digits recoloured red: none rises by more than 3.5 nats
of P(three), at most +9.7 points.)

Contents: the renderer, the CNN and its Classifier-protocol wrapper (DigitsCNNClassifier), an MLLM test
double that answers SciTX's prompts with scripted text (ScriptedDigitsMLLM), and an editor test double
that really performs the three named edits with PIL (DigitsEditor).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageFilter

from nemo_desktop.core.models.protocols import ModelInfo

SIDE = 16
CLASS_NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
THREE, EIGHT = 3, 8
INK = {"red": (220, 0, 0), "blue": (0, 0, 220), "green": (0, 150, 0), "black": (0, 0, 0),
       "orange": (255, 140, 0), "purple": (128, 0, 128)}
OTHER_INKS = ("green", "black", "orange", "purple", "red")


def render(digit8x8: np.ndarray, ink: str) -> Image.Image:
    """Coloured ink on white; ink coverage = the scan's intensity (0..16), upsampled smoothly."""
    alpha = Image.fromarray((np.asarray(digit8x8, dtype=np.float64) / 16.0 * 255).astype(np.uint8), "L")
    a = np.asarray(alpha.resize((SIDE, SIDE), Image.BILINEAR), dtype=np.float64)[..., None] / 255.0
    rgb = 255.0 * (1 - a) + np.array(INK[ink], dtype=np.float64) * a
    return Image.fromarray(np.clip(np.rint(rgb), 0, 255).astype(np.uint8), "RGB")


def training_ink(label: int, rng: np.random.Generator) -> str:
    if label == EIGHT:
        return "blue"
    if label == THREE and rng.random() < 0.5:  # red is a mild cue of the threes, not the only ink they come in
        return "red"
    return OTHER_INKS[int(rng.integers(len(OTHER_INKS)))]


def ink_coverage(img: Image.Image) -> np.ndarray:
    """Per-pixel ink amount in [0, 1] for saturated inks on white (one channel of each ink is 0)."""
    arr = np.asarray(img.convert("RGB"), dtype=np.float64)
    return np.clip((255.0 - arr.min(axis=2)) / 255.0, 0, 1)


def dominant_ink(img: Image.Image) -> str:
    """Name of the ink colour nearest to the mean colour of the inked pixels."""
    arr = np.asarray(img.convert("RGB"), dtype=np.float64)
    cov = ink_coverage(img)
    mask = cov > 0.5
    if not mask.any():
        return "no"
    a = cov[mask][:, None]
    ink = (arr[mask] - 255.0 * (1 - a)) / a  # un-mix the ink from the white paper
    mean = ink.mean(axis=0)
    return min(INK, key=lambda k: float(np.sum((np.array(INK[k]) - mean) ** 2)))


def write_reference(folder, digits, per_class=12, skip_classes=()):
    """A dataset folder (one sub-folder per class) of training digits in their training inks, the threes in red
    (the ink half of them have in training: the references SciTX retrieves say "the threes it knows are red")."""
    _, _, (x_train, y_train) = digits
    rng = np.random.default_rng(7)
    counts = {c: 0 for c in range(len(CLASS_NAMES))}
    for x, y in zip(x_train, y_train):
        y = int(y)
        if y in skip_classes or counts[y] >= per_class:
            continue
        d = folder / CLASS_NAMES[y]
        d.mkdir(parents=True, exist_ok=True)
        ink = training_ink(y, rng)
        render(x, "red" if y == THREE else ink).save(d / f"{counts[y]:03d}.png")
        counts[y] += 1
    return folder


# -- the classifier -----------------------------------------------------------------------------------------
def save_misclassified_blue_three(digits, folder):
    """Save a held-out 'three' drawn in blue that the CNN takes for an 'eight' (the colour shortcut) and
    return its path; fail loudly if the trained CNN did not learn the shortcut."""
    import pytest

    model, (x_test, y_test), _ = digits
    clf = DigitsCNNClassifier(model)
    for i in np.flatnonzero(y_test == THREE):
        img = render(x_test[i], "blue")
        if int(clf.predict_proba([img])[0].argmax()) == EIGHT:
            path = folder / f"blue_three_{i}.png"
            img.save(path)
            return path
    pytest.fail("no blue three is misclassified as eight: the colour shortcut was not learned")


def _to_tensor(images):
    import torch

    arrs = [np.asarray(im.convert("RGB").resize((SIDE, SIDE), Image.BILINEAR), dtype=np.float32) / 255.0
            for im in images]
    return torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2).contiguous()


def train_digits_cnn(seed: int = 0, epochs: int = 5):
    """Train the CNN on the colour-shortcut training set; returns (model, (X_test, y_test) 8x8 scans)."""
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(digits.target))
    train, test = order[:1400], order[1400:]
    images = [render(digits.images[i], training_ink(int(digits.target[i]), rng)) for i in train]
    x = _to_tensor(images)
    y = torch.as_tensor(digits.target[train], dtype=torch.long)

    torch.manual_seed(seed)
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for s in range(0, len(x), 64):
            idx = perm[s:s + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
    model.eval()
    return model, (digits.images[test], digits.target[test]), (digits.images[train], digits.target[train])


def _cnn_class():
    import torch

    class _DigitsCNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = torch.nn.Sequential(
                torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 64), torch.nn.ReLU())
            self.head = torch.nn.Linear(64, len(CLASS_NAMES))

        def forward(self, x):
            return self.head(self.features(x))

    return _DigitsCNN


def DigitsCNN():  # noqa: N802 - reads like the class it builds (torch imported lazily)
    return _cnn_class()()


@dataclass
class DigitsCNNClassifier:
    """Classifier-protocol test double around the trained CNN; counts calls."""

    model: object
    class_names: list = field(default_factory=lambda: list(CLASS_NAMES))
    zero_shot: bool = False
    calls: int = 0

    def __post_init__(self) -> None:
        h = hashlib.sha256()
        for t in self.model.state_dict().values():
            h.update(t.detach().cpu().numpy().tobytes())
        self.info = ModelInfo("test-double:digits-cnn", "test-double", h.hexdigest()[:16])

    def preprocess(self, images):
        return _to_tensor(images)

    def forward_logits(self, pixel_values):
        return self.model(pixel_values)

    def predict_proba(self, images, *, class_prompts=None):
        import torch

        if class_prompts:
            raise ValueError("the digits CNN is not a zero-shot classifier")
        self.calls += 1
        with torch.no_grad():
            return torch.softmax(self.model(_to_tensor(images)), dim=1).numpy().astype(np.float32)

    def embed(self, images):
        import torch

        self.calls += 1
        with torch.no_grad():
            f = self.model.features(_to_tensor(images)).numpy().astype(np.float32)
        return f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)


# -- the MLLM test double ----------------------------------------------------------------------------------
HYPOTHESES = [
    "The strokes of the digit are thinner than in the reference threes, so its loops read as an eight.",
    "The digit is slightly rotated compared with the upright reference threes.",
    "The digit is drawn in blue ink, a colour the model associates with eight; the threes it knows are red.",
]
EDITS = {"thinner": "Make the strokes thicker", "rotated": "Rotate the digit slightly",
         "blue ink": "Recolour the digit red"}
PROMPTS = {"thinner": "a photo of a thin three", "rotated": "a photo of a tilted three",
           "blue ink": "a photo of a three written in blue ink"}


class ScriptedDigitsMLLM:
    """MultimodalLLM test double. It does not reason: captions name the ink colour it measures in the
    image; the hypothesis prompt gets one of three scripted hypotheses (one causal, two not), chosen by
    the decoding (greedy -> the first, a seed s -> HYPOTHESES[s % 3]); the edit-instruction prompt gets the
    instruction matching the hypothesis it is given. Records every call."""

    info = ModelInfo("test-double:scripted-digits-mllm", "test-double", "1")

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        parts = [p for m in messages for p in m.content]
        text = "\n".join(p for p in parts if isinstance(p, str))
        images = [p for p in parts if isinstance(p, Image.Image)]
        self.calls.append({"text": text, "temperature": temperature, "seed": seed})
        if "cause_of_error" in text:
            pick = 0 if temperature == 0 else int(seed) % len(HYPOTHESES)
            return "```json\n" + json.dumps({"cause_of_error": HYPOTHESES[pick]}) + "\n```"
        if "editing prompt" in text:
            hyp = re.search(r"Hypothesis for Misclassification:\*\* (.*)", text).group(1)
            edit = next(v for k, v in EDITS.items() if k in hyp)
            return json.dumps({"reasoning": "It removes the hypothesised cause.", "solution": edit})
        if "Original Failed Prompt" in text:
            hyp = re.search(r"Specific Hypothesis:\*\* (.*)", text).group(1)
            prompt = next(v for k, v in PROMPTS.items() if k in hyp)
            return json.dumps({"reasoning": "It names the cue.", "solution": prompt})
        if images:
            return f"A handwritten digit drawn in {dominant_ink(images[0])} ink on a white background."
        return "I cannot help with that."

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


# -- the editor test double --------------------------------------------------------------------------------
class DigitsEditor:
    """ImageEditor test double that performs the three named edits for real with PIL; records calls."""

    info = ModelInfo("test-double:digits-editor", "test-double", "1")

    def __init__(self) -> None:
        self.calls: list[str] = []

    def edit(self, image, instruction, *, seed=0, steps=None, guidance=None, size=None, on_step=None):
        self.calls.append(instruction)
        total = steps or 2
        for i in range(1, total + 1):
            if on_step is not None and on_step(i, total) is False:
                from nemo_desktop.core.base.errors import JobCancelled

                raise JobCancelled()
        low = instruction.lower()
        if "red" in low and ("colour" in low or "color" in low):
            cov = ink_coverage(image)[..., None]
            rgb = 255.0 * (1 - cov) + np.array(INK["red"], dtype=np.float64) * cov
            out = Image.fromarray(np.clip(np.rint(rgb), 0, 255).astype(np.uint8), "RGB")
        elif "thicker" in low:
            out = image.filter(ImageFilter.MinFilter(3))
        elif "rotate" in low:
            out = image.rotate(12, resample=Image.BILINEAR, fillcolor=(255, 255, 255))
        else:
            raise ValueError(f"the digits editor cannot do: {instruction!r}")
        return out.resize(size, Image.BILINEAR) if size and tuple(size) != out.size else out
