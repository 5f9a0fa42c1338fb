"""The reference index: a dataset run through a classifier once, kept in the results store.

Per image: content sha256, label, prediction, P(label), P(prediction), correctness, prediction entropy
(nats; NaN for rows indexed before store schema 2), top-5 and the L2-normalised embedding. Rows live in the
store's `index_entries` table; embeddings in one memory-mapped .npy matrix whose row order is (correct first,
label, path): "correct references of class c" is one contiguous slice, and so is "every correct reference", so
retrieval reads only what it needs.

Building is incremental and survives interruption:
  * only new images, images whose mtime/size changed and whose sha256 then differs, and images whose label
    changed are run through the classifier; removed images are dropped;
  * each batch first writes its embeddings to a chunk array (`<matrix>-chunk-<first row>`), then commits
    its rows in one transaction; a cancelled or killed run keeps every committed batch, a re-run resumes;
  * at the end (and on cancel) the matrix is rewritten from the live rows and the chunks, the new file is
    published together with the new row numbers in one transaction, then the old files are removed;
  * unreadable images are recorded per file (reason, mtime, size) in the index's meta and skipped; they are
    retried when the file changes.

Every write bumps `meta.version`. Publishing also writes an entries sidecar (the rows as one structured
.npy) stamped with that version: while no write has happened since, `ReferenceIndex.load` reads it instead
of walking a million SQLite rows (2 s instead of 12 s at 10^6 entries on the 2-core test machine).
Array names: `index-<id>-<token>` (matrix), `...-entries-<token>` (sidecar), `index-<id>-chunk-<row>`.

This module holds the loaded index (`ReferenceIndex`), its loading, lookup and deletion, and re-exports the
build: index_build.py (scan, incremental update, publish), index_batches.py (one batch's forward pass and
commit), index_files.py (the matrix, chunks, sidecar and the transaction that publishes them).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..base.errors import StoreError
from ..store.keys import result_key
from .index_build import BuildReport, align_to_classifier, build_index
from .index_files import consolidate, remove_array_files, sidecar_current
from .sources import dataset_root

__all__ = ["INDEX_KIND", "BuildReport", "IndexEntries", "ReferenceIndex", "align_to_classifier", "build_index",
           "delete_index", "find_index", "index_id_for"]

INDEX_KIND = "reference-index"


def index_id_for(dataset_root: str | Path, classifier_id: str, classifier_revision: str | None) -> str:
    """Stable id of (dataset, classifier weights): the first 16 hex digits of a result key."""
    return result_key(INDEX_KIND, dataset_root=str(dataset_root), classifier=classifier_id,
                      classifier_revision=classifier_revision)[:16]


# ------------------------------------------------------------------------------------------------- model

@dataclass
class IndexEntries:
    """Column arrays aligned with the feature matrix rows (entry i <-> features[i])."""

    paths: np.ndarray  # object (str)
    sha256: np.ndarray  # object (str)
    labels: np.ndarray  # int64
    preds: np.ndarray  # int64
    prob_label: np.ndarray  # float32
    prob_pred: np.ndarray  # float32
    correct: np.ndarray  # bool
    entropy: np.ndarray | None = None  # float32 nats; NaN where unknown (rows indexed before schema 2)

    def __post_init__(self) -> None:
        if self.entropy is None:
            self.entropy = np.full(len(self.paths), np.nan, np.float32)

    def __len__(self) -> int:
        return len(self.paths)

    @classmethod
    def empty(cls) -> "IndexEntries":
        return cls(np.empty(0, object), np.empty(0, object), np.empty(0, np.int64), np.empty(0, np.int64),
                   np.empty(0, np.float32), np.empty(0, np.float32), np.empty(0, bool))


class ReferenceIndex:
    """An index loaded for retrieval: entries (column arrays), features (memory-mapped), class names.

    Construct it with `ReferenceIndex.load(store, index_id)` or `build_index(...)`; benchmarks and tests may
    also build one from arrays directly.
    """

    def __init__(self, index_id: str, class_names: Sequence[str], entries: IndexEntries, features: np.ndarray,
                 *, dataset_root: str | None = None, classifier_id: str | None = None,
                 classifier_revision: str | None = None, errors: dict[str, str] | None = None,
                 store: Any = None, meta: dict | None = None) -> None:
        if len(entries) != len(features):
            raise ValueError(f"{len(entries)} entries but {len(features)} feature rows")
        self.index_id = index_id
        self.class_names = list(class_names)
        self.entries = entries
        self.features = features
        self.dataset_root = dataset_root
        self.classifier_id = classifier_id
        self.classifier_revision = classifier_revision
        self.errors = errors or {}
        self.meta = meta or {}
        self.last_build: BuildReport | None = None
        self._store = store
        self._sha_prefix: np.ndarray | None = None
        self._fingerprint: str | None = None
        self._device_features: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return (f"ReferenceIndex({self.index_id!r}, {len(self)} entries, {len(self.class_names)} classes, "
                f"dim {self.feature_dim})")

    @property
    def feature_dim(self) -> int:
        return int(self.features.shape[1]) if self.features.ndim == 2 else 0

    @property
    def accuracy(self) -> float | None:
        return float(self.entries.correct.mean()) if len(self) else None

    def prediction_warning(self) -> str | None:
        """A warning when one class takes most predictions (a preprocessing mismatch; prediction_check.py)."""
        from .prediction_check import dominant_prediction_warning

        return dominant_prediction_warning(self.entries.preds, self.entries.labels, self.class_names)

    def fingerprint(self) -> str:
        """Identity of the index's content (what retrieval results depend on, given the index id): a hash
        of every row's path, image hash, label and prediction in row order. Computed once per load; cache
        keys of retrieval results use it, so a rebuilt or updated index never serves stale observations."""
        if self._fingerprint is None:
            import hashlib

            h = hashlib.sha256()
            e = self.entries
            h.update("\n".join(e.paths.tolist()).encode("utf-8", "surrogateescape"))
            h.update("".join(e.sha256.tolist()).encode("ascii"))
            h.update(np.ascontiguousarray(e.labels, "<i8").tobytes())
            h.update(np.ascontiguousarray(e.preds, "<i8").tobytes())
            h.update(str(self.features.dtype).encode())
            self._fingerprint = f"{len(e)}-{h.hexdigest()[:24]}"
        return self._fingerprint

    def rows_with_sha(self, sha256: str) -> list[int]:
        """Rows whose image has this content hash: a vectorised match on the first 60 bits (an int64 array
        parsed once), confirmed on the full hash."""
        if self._sha_prefix is None:
            self._sha_prefix = np.fromiter((int(h[:15], 16) for h in self.entries.sha256.tolist()), np.int64,
                                           len(self.entries))
        try:
            prefix = int(sha256[:15], 16)
        except ValueError:
            return []
        hits = np.flatnonzero(self._sha_prefix == prefix)
        return hits[self.entries.sha256[hits] == sha256].tolist()

    def top5(self, row: int) -> list[tuple[int, float]]:
        """(class index, probability) pairs of one entry, read from the store."""
        if self._store is None:
            return []
        with self._store.transaction() as conn:
            r = conn.execute("SELECT top5 FROM index_entries WHERE index_id=? AND path=?",
                             (self.index_id, self.entries.paths[row])).fetchone()
        return [(int(i), float(p)) for i, p in json.loads(r[0])] if r and r[0] else []

    def device_features(self, device: str):
        """The matrix as a torch tensor on `device` in its stored precision, uploaded once and kept."""
        if device not in self._device_features:
            import torch

            dtype = torch.float16 if self.features.dtype == np.float16 else torch.float32
            t = torch.empty(self.features.shape, dtype=dtype, device=device)
            for s in range(0, len(self.features), 65536):  # upload in slices: no full host copy
                block = np.array(self.features[s:s + 65536])  # a writable copy (torch refuses read-only memory)
                t[s:s + len(block)] = torch.from_numpy(block).to(device=device, dtype=dtype)
            self._device_features[device] = t
        return self._device_features[device]

    # -- loading --------------------------------------------------------------------------------------
    @classmethod
    def load(cls, store, index_id: str) -> "ReferenceIndex":
        """Load a built index; an interrupted build's pending chunks are consolidated first."""
        for _attempt in range(3):
            loaded = _load_consistent(store, index_id)
            if loaded is not None:
                return loaded
            consolidate(store, index_id, remove_orphans=False)
        raise StoreError(f"The reference index {index_id} keeps changing while it is being loaded.",
                         hint="Wait for the running `nemo index` job to finish, then try again.")

    @staticmethod
    def list(store) -> list[dict]:
        """Summaries of every index in the store (for `nemo index --list` and the dataset browser)."""
        with store.transaction() as conn:
            rows = conn.execute(
                "SELECT i.index_id, i.dataset_root, i.classifier_id, i.classifier_revision, i.feature_dim, "
                "i.updated_at, (SELECT count(*) FROM index_entries e WHERE e.index_id=i.index_id), "
                "(SELECT coalesce(sum(correct), 0) FROM index_entries e WHERE e.index_id=i.index_id) "
                "FROM indexes i ORDER BY i.updated_at DESC").fetchall()
        return [{"index_id": r[0], "dataset_root": r[1], "classifier_id": r[2], "classifier_revision": r[3],
                 "feature_dim": r[4], "updated_at": r[5], "entries": r[6], "correct": r[7]} for r in rows]


def _load_consistent(store, index_id: str) -> ReferenceIndex | None:
    """The index if its rows are exactly 0..n-1 of the published matrix, else None (needs consolidation).

    Fast path: the entries sidecar written with the matrix, valid while no write happened since (meta
    version); otherwise the rows are read from SQLite and checked."""
    with store.transaction() as conn:
        head = conn.execute("SELECT dataset_root, classifier_id, classifier_revision, class_names, features_array, "
                            "meta FROM indexes WHERE index_id=?", (index_id,)).fetchone()
        if head is None:
            raise StoreError(f"No reference index with id {index_id!r} in the results store.",
                             hint="Build one with `nemo index DATASET --classifier ID`; `nemo index --list` shows "
                                  "the existing ones.")
        root, clf_id, clf_rev, class_names, matrix_name, meta_text = head
        meta = json.loads(meta_text) if meta_text else {}
        entries = None
        if matrix_name and sidecar_current(store, meta):
            entries = _entries_from_sidecar(store.open_array(meta["entries_array"], mmap=False),
                                            meta.get("path_prefix", ""))
            features = store.open_array(matrix_name)
            if len(entries) != len(features):
                return None
        else:
            rows = conn.execute("SELECT path, sha256, label, pred, prob_label, prob_pred, correct, row, entropy "
                                "FROM index_entries WHERE index_id=? ORDER BY row", (index_id,)).fetchall()
    if entries is None:
        if matrix_name is None:
            if rows:
                return None
            features = np.zeros((0, 0), np.float32)
        else:
            features = store.open_array(matrix_name)
        row_numbers = np.fromiter((r[7] if r[7] is not None else -1 for r in rows), np.int64, len(rows))
        if len(rows) != len(features) or not np.array_equal(row_numbers, np.arange(len(rows))):
            return None
        if rows:
            paths, shas, labels, preds, pl, pp, corr, _, ent = zip(*rows)
            entries = IndexEntries(np.array(paths, object), np.array(shas, object), np.array(labels, np.int64),
                                   np.array(preds, np.int64), np.array(pl, np.float32), np.array(pp, np.float32),
                                   np.array(corr, bool),
                                   np.array([np.nan if h is None else h for h in ent], np.float32))
        else:
            entries = IndexEntries.empty()
    errors = {p: e["reason"] for p, e in meta.get("errors", {}).items()}
    return ReferenceIndex(index_id, json.loads(class_names or "[]"), entries, features, dataset_root=root,
                          classifier_id=clf_id, classifier_revision=clf_rev, errors=errors, store=store, meta=meta)


def _entries_from_sidecar(struct: np.ndarray, prefix: str) -> IndexEntries:
    paths = np.array([prefix + b.decode("utf-8") for b in struct["path"].tolist()], object)
    shas = np.array([b.decode("ascii") for b in struct["sha256"].tolist()], object)
    entropy = (struct["entropy"].astype(np.float32) if "entropy" in (struct.dtype.names or ())
               else None)  # a sidecar written before schema 2
    return IndexEntries(paths, shas, struct["label"].astype(np.int64), struct["pred"].astype(np.int64),
                        struct["prob_label"].astype(np.float32), struct["prob_pred"].astype(np.float32),
                        struct["correct"].astype(bool), entropy)


def find_index(store, ref: str | Path, classifier=None) -> ReferenceIndex:
    """An index by id, or by dataset path (+ the classifier it was built with, which fixes the id)."""
    text = str(ref)
    with store.transaction() as conn:
        hit = conn.execute("SELECT index_id FROM indexes WHERE index_id=?", (text,)).fetchone()
        if hit is None and classifier is None:  # a path: the only index of that dataset, if unambiguous
            root = dataset_root(text)
            ids = [r[0] for r in conn.execute("SELECT index_id FROM indexes WHERE dataset_root=?", (root,))]
            hit = (ids[0],) if len(ids) == 1 else None
    if hit is not None:
        return ReferenceIndex.load(store, hit[0])
    if classifier is not None:
        index_id = index_id_for(dataset_root(text), classifier.info.model_id, classifier.info.revision)
        return ReferenceIndex.load(store, index_id)
    raise StoreError(f"No reference index matches '{text}'.",
                     hint="Give an index id from `nemo index --list`, or the dataset folder / CSV it was built from "
                          "(with the classifier, if several classifiers indexed it).")

def delete_index(store, index_id: str) -> None:
    """Remove an index's rows and its arrays."""
    with store.transaction() as conn:
        conn.execute("DELETE FROM index_entries WHERE index_id=?", (index_id,))
        conn.execute("DELETE FROM indexes WHERE index_id=?", (index_id,))
        remove_array_files(store, index_id)
