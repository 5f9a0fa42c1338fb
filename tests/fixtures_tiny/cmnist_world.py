"""The coloured-digits world for model-difference tests (test code, never shipped; shared by the analysis,
contract and CLI tests).

Two small CNNs are trained here, in seconds on the CPU, on digits drawn by the product's own renderer
(`SyntheticDigits`' `train` glyph pool) with a planted colour bias, exactly like the seed's CMNIST models:
  * paper world: A sees digits 0-4 only on red, 5-9 on every colour; B sees 0-4 on every colour, 5-9 only on
    blue. A's accuracy drops on non-red 0-4, B's on non-blue 5-9; angle is irrelevant.
  * split world (the team note's): A sees digits 0-4 only on five of the ten colours; B sees everything.
    Here a digit-only explanation is clearly worse than the digit-and-colour one.
`require_bias` makes a fixture fail loudly when a planted bias was not learnt.
"""
from __future__ import annotations

import hashlib

import numpy as np

from nemo_desktop.core.analyses.model_diff import Condition, SyntheticDigits, load_grid, training_set
from nemo_desktop.core.models.protocols import ModelInfo

SIDE = 16
COLOURS = ("red", "green", "blue", "yellow", "magenta", "cyan", "orange", "pink", "purple", "grey")
SPLIT_SEEN = ("red", "green", "blue", "yellow", "magenta")
CLASS_NAMES = [str(d) for d in range(10)]


def paper_bias(model: str) -> dict[int, tuple[str, ...]]:
    if model == "A":
        return {d: ("red",) if d < 5 else COLOURS for d in range(10)}
    return {d: COLOURS if d < 5 else ("blue",) for d in range(10)}


def split_bias(model: str) -> dict[int, tuple[str, ...]]:
    if model == "A":
        return {d: SPLIT_SEEN if d < 5 else COLOURS for d in range(10)}
    return {d: COLOURS for d in range(10)}


def _tensor(images):
    import torch

    arr = np.stack([np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0 for im in images])
    return torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous()


def _net():
    import torch

    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def train_cnn(bias: dict[int, tuple[str, ...]], *, seed: int = 0, epochs: int = 4):
    import torch

    images, labels = training_set(bias, size=SIDE, copies=1, seed=seed)
    x, y = _tensor(images), torch.as_tensor(labels, dtype=torch.long)
    torch.manual_seed(seed)
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for s in range(0, len(x), 64):
            idx = perm[s:s + 64]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
            opt.step()
    net.eval()
    return net


class CNNClassifier:
    """Classifier-protocol wrapper of a trained test CNN; counts forward calls and images."""

    zero_shot = False

    def __init__(self, net, name: str, class_names=None):
        self.net, self.class_names = net, list(class_names or CLASS_NAMES)
        h = hashlib.sha256()
        for t in net.state_dict().values():
            h.update(t.detach().numpy().tobytes())
        self.info = ModelInfo(f"test-double:cnn-{name}", "test-double", h.hexdigest()[:16])
        self.calls = 0
        self.images = 0

    def predict_proba(self, images, *, class_prompts=None):
        import torch

        self.calls += 1
        self.images += len(images)
        with torch.no_grad():
            return torch.softmax(self.net(_tensor(images)), dim=1).numpy()

    def embed(self, images):
        raise NotImplementedError

    def preprocess(self, images):
        return _tensor(images)

    def forward_logits(self, x):
        return self.net(x)


def generator():
    return SyntheticDigits(size=SIDE)


def accuracy(clf, digit: int, colour: str, m: int = 40) -> float:
    gen = generator()
    cond = gen.space.make({"digit": digit, "color": colour, "angle": 0})
    pairs = gen.sample(cond, m, seed=123)
    pred = clf.predict_proba([p[0] for p in pairs]).argmax(1)
    return float(np.mean(pred == digit))


def require_bias(clf, low: list[tuple[int, str]], high: list[tuple[int, str]]):
    import pytest

    lows = [accuracy(clf, d, c) for d, c in low]
    highs = [accuracy(clf, d, c) for d, c in high]
    if max(lows) > 0.5 or min(highs) < 0.7:
        pytest.fail(f"{clf.info.model_id}: planted bias not learnt (biased cells {lows}, normal cells {highs})")


def condition(digit: int, colour: str, angle: int = 0) -> Condition:
    return load_grid().make({"digit": digit, "color": colour, "angle": angle})
