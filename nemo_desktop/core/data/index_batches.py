"""One batch of a reference-index build: the forward pass, the rows it gives, and their commit (the embeddings'
chunk first, then the rows in one transaction; see reference_index.py for the design)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import ModelError
from ..models.outputs import check_outputs, predict_with_embeddings
from .index_files import chunk_name, meta_of, write_meta
from .input_pipeline import LoadedBatch


@dataclass
class _Row:
    path: str
    sha256: str
    label: int
    pred: int
    prob_label: float
    prob_pred: float
    entropy: float
    top5: list
    mtime: float
    size: int
    embedding: np.ndarray


@dataclass
class _BatchForward:
    """How a loaded batch becomes (probabilities, unit embeddings): the classifier's tensor-level one-pass entry
    point after worker-side `prepare_batch`, or its image-level one (a user's own classifier object)."""

    classifier: Any
    prepare: Any = None  # classifier.prepare_batch when it has the tensor-level path

    def __call__(self, loaded: LoadedBatch, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
        if self.prepare is not None:
            out = self.classifier.outputs_from_pixels(self.classifier.to_device(loaded.pixels))
            return check_outputs(out.probs, out.embeddings, len(loaded.items), n_classes)
        return predict_with_embeddings(self.classifier, loaded.images)


@dataclass
class _DeviceForward:
    """GPU decoding (gpu_decode.py): the batch's JPEG bytes decoded and resized on the device, then the
    classifier's tensor-level pass. A batch that fails to decode is decoded image by image; an image that still
    fails becomes that file's error, as on the CPU path."""

    classifier: Any
    preprocess: Any
    prepare: Any = None  # the loader hands over undecoded images

    def __call__(self, loaded: LoadedBatch, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
        try:
            pixels = self.preprocess(loaded.images)
        except Exception:  # noqa: BLE001 - find the bad file(s) below
            pixels = self._one_by_one(loaded)
        out = self.classifier.outputs_from_pixels(self.classifier.to_device(pixels))
        return check_outputs(out.probs, out.embeddings, len(loaded.items), n_classes)

    def _one_by_one(self, loaded: LoadedBatch):
        import torch

        keep, tensors = [], []
        for i, image in enumerate(loaded.images):
            try:
                tensors.append(self.preprocess([image]))
                keep.append(i)
            except Exception as exc:  # noqa: BLE001 - this file's problem, not the run's
                loaded.errors.append((loaded.items[i], f"{type(exc).__name__}: {exc}"))
        loaded.items = [loaded.items[i] for i in keep]
        loaded.sha256 = [loaded.sha256[i] for i in keep]
        loaded.images = [loaded.images[i] for i in keep]
        if not tensors:
            raise ModelError("No image of this batch could be decoded on the GPU.")
        return torch.cat(tensors)


def _batch_forward(classifier) -> _BatchForward:
    names = ("prepare_batch", "to_device", "outputs_from_pixels")
    if all(callable(getattr(classifier, n, None)) for n in names):
        return _BatchForward(classifier, classifier.prepare_batch)
    return _BatchForward(classifier)


def _rows(loaded: LoadedBatch, forward: _BatchForward, class_names) -> list[_Row]:
    """One forward pass for the batch's decoded images, then one row per image."""
    if not loaded.items:
        return []
    probs, feats = forward(loaded, len(class_names))
    p64 = probs.astype(np.float64)
    entropy = -(p64 * np.log(np.where(p64 > 0, p64, 1.0))).sum(axis=1)  # nats; 0 log 0 = 0
    rows = []
    k = min(5, len(class_names))
    for i, ((path, label, mtime, size), sha) in enumerate(zip(loaded.items, loaded.sha256)):
        p = probs[i]
        pred = int(np.argmax(p))
        top = np.argsort(-p, kind="stable")[:k]
        rows.append(_Row(str(path), sha, int(label), pred, float(p[label]), float(p[pred]), float(entropy[i]),
                         [[int(j), round(float(p[j]), 6)] for j in top], mtime, size, feats[i]))
    return rows


def _commit_batch(store, index_id: str, rows: list[_Row], new_errors: dict[str, dict]) -> None:
    """Reserve row numbers, write the chunk of embeddings, then commit the rows (chunk first: never a row
    pointing at missing features)."""
    start = None
    if rows:
        dim = len(rows[0].embedding)
        with store.transaction() as conn:
            meta = meta_of(conn, index_id) or {}
            start = int(meta.get("next_row", 0))
            meta["next_row"] = start + len(rows)
            meta["version"] = meta.get("version", 0) + 1  # a consolidation running meanwhile must not publish
            write_meta(conn, index_id, meta)
        store.save_array(chunk_name(index_id, start),
                         np.stack([r.embedding for r in rows]).astype(np.float32))
    with store.transaction() as conn:
        meta = meta_of(conn, index_id) or {}
        if rows:
            feat_dim = conn.execute("SELECT feature_dim FROM indexes WHERE index_id=?", (index_id,)).fetchone()[0]
            if feat_dim is not None and feat_dim != dim:
                raise ModelError(f"The classifier's embeddings have {dim} dimensions but the index holds {feat_dim}.",
                                 hint="The model changed without a new revision; delete the index and rebuild it.")
            conn.execute("UPDATE indexes SET feature_dim=? WHERE index_id=?", (dim, index_id))
            conn.executemany(
                "INSERT OR REPLACE INTO index_entries(index_id, path, sha256, label, pred, prob_label, prob_pred, "
                "correct, row, top5, mtime, size, entropy) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(index_id, r.path, r.sha256, r.label, r.pred, r.prob_label, r.prob_pred, int(r.pred == r.label),
                  start + i, json.dumps(r.top5), r.mtime, r.size, r.entropy) for i, r in enumerate(rows)])
            # A re-processed image that was an error before is not one any more.
            for r in rows:
                meta.get("errors", {}).pop(r.path, None)
        meta.setdefault("errors", {}).update(new_errors)
        meta["version"] = meta.get("version", 0) + 1
        write_meta(conn, index_id, meta)

