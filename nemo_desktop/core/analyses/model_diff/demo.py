"""The demo's two classifiers: small digit CNNs trained on the CPU in about a minute with the seed's planted
colour biases (CMNIST, §5.1), so `nemo compare demo` runs end to end with nothing but an LLM.

    Model A sees digits 0-4 only on red and 5-9 on every colour; model B sees 0-4 on every colour and 5-9
    only on blue. A is worse on non-red 0-4, B on non-blue 5-9; the angle does not matter.

The images come from the product's renderer (`training_set`, the glyphs' `train` pool); the condition source
draws from the held-out `eval` pool. The CNN is a two-block conv net (the ReBias SimpleConvNet's shape scaled
down to 16 px images), trained with Adam for a few epochs; its weights' hash is its revision, so a model
trained again identically reuses every stored result.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...base.job_context import JobContext, null_context
from ...models.protocols import ModelInfo
from .conditions import load_grid
from .synthetic_digits import SyntheticDigits, training_set

SIDE = 16
CLASS_NAMES = [str(d) for d in range(10)]


def paper_bias(model: str) -> dict[int, tuple[str, ...]]:
    """Allowed background colours per digit of the seed's model A or B."""
    colours = tuple(load_grid("cmnist").attribute("color").values)
    if model == "A":
        return {d: ("red",) if d < 5 else colours for d in range(10)}
    return {d: colours if d < 5 else ("blue",) for d in range(10)}


def to_tensor(images: Sequence[Any]):
    import torch

    arr = np.stack([np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0 for im in images])
    return torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous()


def digit_cnn():
    import torch

    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def train_cnn(bias: Mapping[int, Sequence[str]], *, seed: int = 0, epochs: int = 4,
              ctx: JobContext | None = None, stage: str = "Training"):
    import torch

    ctx = ctx or null_context()
    images, labels = training_set(bias, size=SIDE, copies=1, seed=seed)
    x, y = to_tensor(images), torch.as_tensor(labels, dtype=torch.long)
    torch.manual_seed(seed)
    net = digit_cnn()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        ctx.progress(stage, epoch, epochs)
        perm = torch.randperm(len(x), generator=gen)
        for s in range(0, len(x), 64):
            ctx.check_cancelled()
            idx = perm[s:s + 64]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
            opt.step()
    ctx.progress(stage, epochs, epochs)
    net.eval()
    return net


class DigitCNNClassifier:
    """Classifier protocol over a trained demo CNN."""

    zero_shot = False

    def __init__(self, net: Any, name: str, class_names: Sequence[str] | None = None) -> None:
        self.net, self.class_names = net, list(class_names or CLASS_NAMES)
        h = hashlib.sha256()
        for t in net.state_dict().values():
            h.update(t.detach().numpy().tobytes())
        self.info = ModelInfo(f"demo:digit-cnn-{name}", "demo", h.hexdigest()[:16])
        self.calls = 0
        self.images = 0

    def predict_proba(self, images, *, class_prompts=None):
        import torch

        self.calls += 1
        self.images += len(images)
        with torch.no_grad():
            return torch.softmax(self.net(to_tensor(images)), dim=1).numpy()

    def embed(self, images):
        raise NotImplementedError("The demo CNN offers no embedding.")

    def preprocess(self, images):
        return to_tensor(images)

    def forward_logits(self, x):
        return self.net(x)


def demo_models(*, seed: int = 0, epochs: int = 6, ctx: JobContext | None = None) \
        -> tuple[DigitCNNClassifier, DigitCNNClassifier]:
    """The seed's biased models A and B (measured: 67 s for both on a busy shared 2-core machine)."""
    ctx = ctx or null_context()
    a = DigitCNNClassifier(train_cnn(paper_bias("A"), seed=seed, epochs=epochs, ctx=ctx, stage="Training model A"),
                           "A")
    b = DigitCNNClassifier(train_cnn(paper_bias("B"), seed=seed, epochs=epochs, ctx=ctx, stage="Training model B"),
                           "B")
    return a, b


def demo_source() -> SyntheticDigits:
    return SyntheticDigits(size=SIDE)
