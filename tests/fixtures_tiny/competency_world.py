"""The digits competency world (test code, never shipped).

scikit-learn's bundled handwritten digits (real 8x8 scans) drawn as 16x16 RGB images in one of six saturated
inks at random (so ink colour is no shortcut). Digits 0-8 are in-distribution; digit 9 is held out as the
"unfamiliar content" cause. A small CNN (9 classes) is trained on in-distribution digits in seconds; its
wrapper implements the Classifier protocol plus the differentiable extension the competency core needs.
"""
from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from nemo_desktop.core.models.protocols import ChatMessage, ModelInfo

SIDE = 16
CLASS_NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight"]
HELD_OUT = 9
# The estimator of the tests: small but real (16 px autoencoder, two stride-2 layers, 32-d latent).
TINY = dict(image_size=16, channels=(16, 32), latent_dim=32, epochs=20, batch_size=64, calibration_fraction=0.25)
INKS = [(220, 0, 0), (0, 0, 220), (0, 150, 0), (0, 0, 0), (255, 140, 0), (128, 0, 128)]


def render(digit8x8: np.ndarray, ink: tuple[int, int, int]) -> Image.Image:
    alpha = Image.fromarray((np.asarray(digit8x8, np.float64) / 16.0 * 255).astype(np.uint8), "L")
    a = np.asarray(alpha.resize((SIDE, SIDE), Image.BILINEAR), np.float64)[..., None] / 255.0
    rgb = 255.0 * (1 - a) + np.array(ink, np.float64) * a
    return Image.fromarray(np.clip(np.rint(rgb), 0, 255).astype(np.uint8), "RGB")


def to_unit(images) -> torch.Tensor:
    arrs = [np.asarray(im.convert("RGB").resize((SIDE, SIDE), Image.BILINEAR), np.float32) / 255.0 for im in images]
    return torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2).contiguous()


class DigitsNet(torch.nn.Module):
    def __init__(self, n_classes: int = len(CLASS_NAMES)) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 64), torch.nn.ReLU())
        self.head = torch.nn.Linear(64, n_classes)

    def forward(self, x):
        return self.head(self.features(x))


@dataclass
class DigitsClassifier:
    """Classifier-protocol test double with the differentiable extension (unit_tensor & co.)."""

    model: torch.nn.Module
    class_names: list = field(default_factory=lambda: list(CLASS_NAMES))
    zero_shot: bool = False

    def __post_init__(self) -> None:
        h = hashlib.sha256()
        for t in self.model.state_dict().values():
            h.update(t.detach().cpu().numpy().tobytes())
        self.info = ModelInfo("test-double:digits-competency-cnn", "test-double", h.hexdigest()[:16])
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    def unit_tensor(self, images):
        return to_unit(images)

    def logits_from_unit(self, x):
        return self.model(x)

    def features_from_unit(self, x):
        return self.model.features(x)

    def preprocess(self, images):
        return to_unit(images)

    def forward_logits(self, pixel_values):
        return self.model(pixel_values)

    def predict_proba(self, images, *, class_prompts=None):
        with torch.no_grad():
            return torch.softmax(self.model(to_unit(images)), 1).numpy().astype(np.float32)

    def embed(self, images):
        with torch.no_grad():
            f = self.model.features(to_unit(images)).numpy()
        return f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)


@dataclass
class World:
    classifier: DigitsClassifier
    fit_images: list  # in-distribution images given to the estimator fit (it splits off calibration itself)
    fit_labels: np.ndarray
    test_images: list  # in-distribution test images
    test_labels: np.ndarray
    nines: list  # the held-out class


def build_world(seed: int = 0, epochs: int = 6) -> World:
    from sklearn.datasets import load_digits

    d = load_digits()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(d.target))
    images = [render(d.images[i], INKS[int(rng.integers(len(INKS)))]) for i in order]
    labels = d.target[order]
    idx_id = np.flatnonzero(labels != HELD_OUT)
    fit_idx, test_idx = idx_id[:1300], idx_id[1300:]
    x, y = to_unit([images[i] for i in fit_idx]), torch.as_tensor(labels[fit_idx])

    torch.manual_seed(seed)
    model = DigitsNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for s in range(0, len(x), 64):
            i = perm[s:s + 64]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[i]), y[i]).backward()
            opt.step()
    return World(DigitsClassifier(model), [images[i] for i in fit_idx], labels[fit_idx],
                 [images[i] for i in test_idx], labels[test_idx],
                 [images[i] for i in np.flatnonzero(labels == HELD_OUT)])


class RecordingMLLM:
    """MultimodalLLM test double: records each call (messages, decoding) and answers with a fixed sentence
    naming how many images it was shown; it does not reason."""

    info = ModelInfo("test-double:recording-mllm", "test-double", "1")

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None):
        assert all(isinstance(m, ChatMessage) for m in messages)
        self.calls.append({"messages": messages, "max_new_tokens": max_new_tokens, "temperature": temperature})
        n_images = sum(isinstance(p, Image.Image) for m in messages for p in m.content)
        return f"Answer {len(self.calls)} from {n_images} image(s): the strokes look unusual."

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


class CountingClassifier(DigitsClassifier):
    """DigitsClassifier that counts its batches (unit_tensor calls): the contract test's 'model calls'."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.calls: list[int] = []

    def unit_tensor(self, images):
        self.calls.append(len(images))
        return super().unit_tensor(images)


def write_class_folders(root, images, labels, per_class: int) -> Path:
    """A labelled folder dataset (root/<class name>/<i>.png), `per_class` images of each class present."""
    root = Path(root)
    counts: dict[int, int] = {}
    for im, y in zip(images, labels):
        y = int(y)
        if counts.get(y, 0) >= per_class:
            continue
        counts[y] = counts.get(y, 0) + 1
        d = root / CLASS_NAMES[y]
        d.mkdir(parents=True, exist_ok=True)
        im.save(d / f"{counts[y]:03d}.png")
    return root


_CONTRACT: dict = {}


def contract_world() -> dict:
    """The competency pieces of the analysis-contract test, built once per process: the digits world with a
    counting classifier, and an estimator fitted with TINY (seconds)."""
    if not _CONTRACT:
        from nemo_desktop.core.analyses.competency import CompetencyEstimatorFit, EstimatorConfig

        torch.set_num_threads(1)
        world = build_world()
        clf = CountingClassifier(world.classifier.model)
        with tempfile.TemporaryDirectory() as work:
            fit = CompetencyEstimatorFit(clf, EstimatorConfig(**TINY), work_dir=work)
            fit(world.fit_images[:600], world.fit_labels[:600])
        _CONTRACT.update(world=world, classifier=clf, estimator=fit.estimator)
    return _CONTRACT
