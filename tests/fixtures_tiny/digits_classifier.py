"""A real (small) classifier for tests: an MLP trained on scikit-learn's bundled 8x8 digits.

`DigitsMLPClassifier` is a TEST DOUBLE for the Classifier protocol: honest about what it is (family
"test-double"), it really classifies digit images and its embedding is the MLP's hidden layer, so
retrieval tests see a real feature space. Images are the digits rendered as greyscale PNGs
(`render_digit`), decoded back to 8x8 by area averaging, which inverts the rendering exactly.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from PIL import Image

from nemo_desktop.core.models.protocols import ModelInfo

SCALE = 4  # rendered images are 32x32


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.data.astype(np.float32), d.target.astype(np.int64)  # values 0..16


def render_digit(x: np.ndarray) -> Image.Image:
    """8x8 values in 0..16 -> a 32x32 RGB image (grey)."""
    g = np.rint(np.asarray(x, np.float64).reshape(8, 8) * (255.0 / 16.0)).astype(np.uint8)
    return Image.fromarray(g, "L").resize((8 * SCALE, 8 * SCALE), Image.Resampling.NEAREST).convert("RGB")


def write_digit_folder(root: Path, X: np.ndarray, y: np.ndarray, start: int = 0) -> list[Path]:
    """root/<digit>/digit_<n>.png for each sample; returns the paths in sample order."""
    paths = []
    for i, (x, label) in enumerate(zip(X, y)):
        p = Path(root) / str(int(label)) / f"digit_{start + i:05d}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        render_digit(x).save(p)
        paths.append(p)
    return paths


class DigitsMLPClassifier:
    """Classifier protocol over a trained sklearn MLPClassifier (one hidden layer)."""

    zero_shot = False

    def __init__(self, mlp, model_id: str = "test-double:digits-mlp") -> None:
        self.mlp = mlp
        self.class_names: Sequence[str] = [str(c) for c in mlp.classes_]
        digest = hashlib.sha256(b"".join(np.ascontiguousarray(w).tobytes() for w in mlp.coefs_)).hexdigest()[:12]
        self.info = ModelInfo(model_id=model_id, family="test-double", revision=digest)
        self.images_seen = 0  # how many images went through predict_proba (incremental-indexing tests)

    @classmethod
    def train(cls, X: np.ndarray, y: np.ndarray, hidden: int = 32, seed: int = 0) -> "DigitsMLPClassifier":
        from sklearn.neural_network import MLPClassifier

        # L-BFGS: converges on 1.5k samples in well under a second (Adam needs many epochs here).
        mlp = MLPClassifier(hidden_layer_sizes=(hidden,), solver="lbfgs", max_iter=300, random_state=seed)
        mlp.fit(X / 16.0, y)
        return cls(mlp)

    @staticmethod
    def to_features(images: Sequence[Image.Image]) -> np.ndarray:
        rows = [np.asarray(im.convert("L").resize((8, 8), Image.Resampling.BOX), np.float32).reshape(-1)
                for im in images]
        return np.stack(rows) / 255.0  # == original value / 16

    def predict_proba(self, images: Sequence[Image.Image], *,
                      class_prompts: Mapping[int, str] | None = None) -> np.ndarray:
        if class_prompts:
            raise ValueError("class_prompts is only for zero-shot classifiers")
        self.images_seen += len(images)
        return self.mlp.predict_proba(self.to_features(images)).astype(np.float32)

    def embed(self, images: Sequence[Image.Image]) -> np.ndarray:
        h = np.maximum(self.to_features(images) @ self.mlp.coefs_[0] + self.mlp.intercepts_[0], 0.0)
        h = h.astype(np.float32)
        return h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-12)

    def preprocess(self, images: Sequence[Image.Image]):
        import torch

        return torch.from_numpy(self.to_features(images))

    def forward_logits(self, pixel_values):
        import torch

        w0, w1 = (torch.from_numpy(w.astype(np.float32)) for w in self.mlp.coefs_)
        b0, b1 = (torch.from_numpy(b.astype(np.float32)) for b in self.mlp.intercepts_)
        return torch.relu(pixel_values @ w0 + b0) @ w1 + b1
