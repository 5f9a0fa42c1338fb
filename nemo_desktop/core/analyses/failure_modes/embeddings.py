"""Joint image-text embeddings for the failure-modes analysis, computed once and kept in the results store.

Images: one float32 matrix per (reference index content, embedder id + revision), rows aligned with the
index's rows. Built in batches like the index itself: each batch is saved as a chunk array
(`fmjoint-<key>-chunk-<first row>`) before the next starts, so a cancelled or killed run keeps its work and a
re-run embeds only the rows no chunk covers; when every row is covered the chunks are gathered into one
memory-mapped matrix (`fmjoint-<key>`), a store record (kind "failure-modes-embeddings") names it, and the
chunks are removed. Images that cannot be read get a NaN row and are listed; the analysis leaves them out.

When the embedder IS the index's classifier and that classifier is zero-shot (CLIP/SigLIP/open_clip), the
index's own features are already its unit image embeddings in the joint space: they are used as they are.

Sentences: one array per (sentence-set hash, embedder), kind "failure-modes-text".
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ...base.errors import JobCancelled, ModelError
from ...base.job_context import JobContext
from ...models.protocols import ModelInfo
from ...store.arrays import numbered_arrays
from ...store.keys import result_key
from .clustering import unit_rows

log = logging.getLogger(__name__)

IMAGE_KIND = "failure-modes-embeddings"
TEXT_KIND = "failure-modes-text"


@runtime_checkable
class JointEmbedder(Protocol):
    """Images and texts into one space (every zero-shot classifier adapter satisfies it)."""

    info: ModelInfo

    def embed(self, images: Sequence[Any]) -> np.ndarray:
        """(N, D) unit image embeddings."""

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(N, D) unit text embeddings in the same space."""


def embedder_identity(embedder: Any) -> dict[str, Any]:
    return {"id": embedder.info.model_id, "revision": embedder.info.revision, "family": embedder.info.family}


def reuses_index_features(index: Any, embedder: Any) -> bool:
    """True when the index's features already are this embedder's joint-space image embeddings."""
    return (bool(getattr(embedder, "zero_shot", False)) and index.feature_dim > 0
            and index.classifier_id == embedder.info.model_id
            and index.classifier_revision == embedder.info.revision)


@dataclass
class JointImages:
    matrix: np.ndarray  # (n_index_rows, D) float32 unit rows; NaN rows for unreadable images
    source: str  # "index-features" | "store" | "computed" | "memory"
    failed: dict[str, str] = field(default_factory=dict)  # path -> reason
    embedded_now: int = 0  # images run through the embedder in this call


def _prefix(key: str) -> str:
    return f"fmjoint-{key[:24]}"


def _chunk_name(key: str, start: int) -> str:
    return f"{_prefix(key)}-chunk-{start:012d}"


def _chunks(store, key: str) -> dict[int, Any]:
    return numbered_arrays(store.arrays_dir, f"{_prefix(key)}-chunk-")


def image_embeddings(index: Any, embedder: Any, store: Any = None, ctx: JobContext | None = None, *,
                     batch_size: int = 64) -> JointImages:
    """Joint embeddings of every index row (see the module docstring for storage and resume)."""
    ctx = ctx or JobContext()
    if reuses_index_features(index, embedder):
        return JointImages(index.features, "index-features")
    key = result_key(IMAGE_KIND, index_id=index.index_id, fingerprint=index.fingerprint(),
                     embedder=embedder_identity(embedder))
    if store is not None:
        rec = store.get(key)
        if rec is not None and store.array_path(rec.payload["array"]).exists():
            return JointImages(store.open_array(rec.payload["array"]), "store", dict(rec.payload.get("failed", {})))
    n = len(index)
    parts: dict[int, np.ndarray] = {}
    if store is not None:
        for start, path in _chunks(store, key).items():
            arr = np.load(path, mmap_mode="r")
            if start + len(arr) <= n:
                parts[start] = arr
    covered = np.zeros(n, bool)
    for start, arr in parts.items():
        covered[start:start + len(arr)] = True
    todo = np.flatnonzero(~covered)
    failed: dict[str, str] = {}
    done_now = 0
    ctx.progress("Embedding images", int(covered.sum()), n)
    try:
        for b in range(0, len(todo), batch_size):
            ctx.check_cancelled()
            rows = todo[b:b + batch_size]
            # A chunk covers a contiguous row range: split the batch where the missing rows jump.
            for run in np.split(rows, np.flatnonzero(np.diff(rows) != 1) + 1):
                block = _embed_rows(index, embedder, run, failed)
                parts[int(run[0])] = block
                if store is not None:
                    store.save_array(_chunk_name(key, int(run[0])), block)
            done_now += len(rows)
            ctx.progress("Embedding images", int(covered.sum()) + done_now, n)
    except JobCancelled:
        raise JobCancelled(f"Embedding cancelled: {int(covered.sum()) + done_now} of {n} images are embedded "
                           "and stored; run the analysis again to resume.") from None
    matrix = _gather(parts, n)
    failed.update({str(index.entries.paths[r]): "could not be read when embedding (an earlier run)"
                   for r in np.flatnonzero(np.isnan(matrix).any(axis=1)) if str(index.entries.paths[r]) not in failed})
    if store is None:
        return JointImages(matrix, "memory", failed, done_now)
    name = _prefix(key)
    store.save_array(name, matrix)
    store.put(key, IMAGE_KIND, {"array": name, "rows": n, "dim": int(matrix.shape[1]), "index_id": index.index_id,
                                "fingerprint": index.fingerprint(), "embedder": embedder_identity(embedder),
                                "failed": failed})
    for path in _chunks(store, key).values():
        path.unlink(missing_ok=True)
    return JointImages(store.open_array(name), "computed", failed, done_now)


def _embed_rows(index: Any, embedder: Any, rows: np.ndarray, failed: dict[str, str]) -> np.ndarray:
    from ...base.images import load_image

    images, ok = [], []
    for i, r in enumerate(rows.tolist()):
        path = str(index.entries.paths[r])
        try:
            images.append(load_image(path))
            ok.append(i)
        except Exception as exc:  # noqa: BLE001 - an unreadable file is that image's problem, not the run's
            failed[path] = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    feats = np.asarray(embedder.embed(images), np.float32) if images else np.zeros((0, 0), np.float32)
    if images and (feats.ndim != 2 or len(feats) != len(images)):
        raise ModelError(f"The embedder returned an array of shape {feats.shape} for {len(images)} images.",
                         hint="Its embed() must return one vector per image.")
    dim = feats.shape[1] if images else (index.feature_dim or 1)
    block = np.full((len(rows), dim), np.nan, np.float32)
    if images:
        block[ok] = unit_rows(feats)
    return block


def _gather(parts: dict[int, np.ndarray], n: int) -> np.ndarray:
    dims = {a.shape[1] for a in parts.values() if len(a) and not np.isnan(a).all()}
    if len(dims) > 1:
        raise ModelError(f"Stored embedding chunks disagree on the dimension ({sorted(dims)}).",
                         hint="The embedder changed without a new revision; delete its stored embeddings.")
    dim = dims.pop() if dims else 1
    out = np.full((n, dim), np.nan, np.float32)
    for start, arr in parts.items():
        if arr.shape[1] == dim:
            out[start:start + len(arr)] = arr
    return out


def text_embeddings(texts: Sequence[str], set_sha: str, embedder: Any, store: Any = None) -> tuple[np.ndarray, bool]:
    """(N, D) unit sentence embeddings and whether they came from the store (computed once per set)."""
    key = result_key(TEXT_KIND, sentences=set_sha, embedder=embedder_identity(embedder))
    if store is not None:
        rec = store.get(key)
        if rec is not None and store.array_path(rec.payload["array"]).exists():
            arr = np.asarray(store.open_array(rec.payload["array"], mmap=False))
            if len(arr) == len(texts):
                return arr, True
    emb = np.asarray(embedder.embed_texts(list(texts)), np.float32)
    if emb.ndim != 2 or len(emb) != len(texts):
        raise ModelError(f"The embedder returned an array of shape {emb.shape} for {len(texts)} sentences.",
                         hint="Its embed_texts() must return one vector per sentence.")
    emb = unit_rows(emb)
    if store is not None:
        name = f"fmtext-{key[:24]}"
        store.save_array(name, emb)
        store.put(key, TEXT_KIND, {"array": name, "sentences": set_sha, "count": len(texts),
                                   "embedder": embedder_identity(embedder)})
    return emb, False
