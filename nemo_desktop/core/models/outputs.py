"""One forward pass, every output a caller needs: logits, probabilities and L2-normalised embeddings.

Indexing stores probabilities and embeddings for every image, SciTX and the baselines classify the query and
embed it for retrieval. Running the network once for both halves the classifier's cost. Every NEMO
classifier adapter implements `predict_with_embeddings(images)`; `predict_with_embeddings(classifier, images)`
below is how callers reach it, so that a user's own classifier object that only has the protocol's
`predict_proba` and `embed` still plugs in (two calls, as the protocol allows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..base.errors import ModelError


@dataclass(frozen=True)
class ClassifierOutputs:
    """Aligned rows of one forward pass (float32 numpy arrays)."""

    logits: np.ndarray  # (N, C)
    probs: np.ndarray  # (N, C)
    embeddings: np.ndarray  # (N, D), unit rows

    @staticmethod
    def concat(parts: Sequence["ClassifierOutputs"], n_classes: int) -> "ClassifierOutputs":
        if not parts:
            empty = np.zeros((0, n_classes), np.float32)
            return ClassifierOutputs(empty, empty.copy(), np.zeros((0, 0), np.float32))
        return ClassifierOutputs(*(np.concatenate([getattr(p, f) for p in parts]).astype(np.float32, copy=False)
                                   for f in ("logits", "probs", "embeddings")))


def softmax_np(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z, dtype=np.float64)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def predict_with_embeddings(classifier: Any, images: Sequence[Any], *,
                            class_prompts=None) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities (N, C), unit embeddings (N, D)) of `images`, in one forward pass where the classifier
    offers it. Shapes are checked: a wrong-shaped answer is a ModelError, not a silent misalignment."""
    fn = getattr(classifier, "predict_with_embeddings", None)
    kw = {"class_prompts": class_prompts} if class_prompts else {}
    if callable(fn):
        probs, feats = fn(images, **kw)
    else:  # a user's classifier object with only the protocol's two entry points
        probs, feats = classifier.predict_proba(images, **kw), classifier.embed(images)
    return check_outputs(np.asarray(probs, np.float32), np.asarray(feats, np.float32), len(images),
                         len(classifier.class_names))


def check_outputs(probs: np.ndarray, feats: np.ndarray, n: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Shape checks and row normalisation (retrieval takes dot products as cosine similarities)."""
    if probs.shape != (n, c):
        raise ModelError(f"The classifier returned probabilities of shape {probs.shape} for {n} images and {c} "
                         "classes.", hint="Its predict_proba must return one row of class probabilities per image.")
    if feats.ndim != 2 or len(feats) != n:
        raise ModelError(f"The classifier returned embeddings of shape {feats.shape} for {n} images.",
                         hint="Its embed must return one feature vector per image.")
    norms = np.linalg.norm(feats, axis=1, keepdims=True)
    return probs, feats / np.maximum(norms, 1e-12)
