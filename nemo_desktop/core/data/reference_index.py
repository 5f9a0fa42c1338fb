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
"""
from __future__ import annotations

import json
import logging
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import JobCancelled, ModelError, StoreError
from ..jobs import JobContext, null_context
from ..models.outputs import check_outputs, predict_with_embeddings
from ..store.keys import content_hash, result_key
from .datasets import LabelledImageDataset, open_dataset
from .input_pipeline import BatchLoader, LoadedBatch, LoaderSettings, draft_side_for
from .index_files import chunk_name, consolidate, meta_of, remove_array_files, sidecar_current, write_meta

log = logging.getLogger(__name__)

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


@dataclass
class BuildReport:
    """What one build_index call did."""

    index_id: str
    total: int = 0  # images in the dataset
    processed: int = 0  # run through the classifier in this call
    unchanged: int = 0  # already indexed and untouched (or touched with the same content)
    removed: int = 0  # dropped because the file left the dataset
    errors: dict[str, str] = field(default_factory=dict)  # path -> reason, every unreadable file
    new_errors: int = 0  # unreadable files met in this call
    cancelled: bool = False
    pending: int = 0  # images still to process (after a cancel)
    seconds: float = 0.0

    @property
    def indexed(self) -> int:
        return self.total - len(self.errors) - self.pending

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("index_id", "total", "processed", "unchanged", "removed", "new_errors",
                                           "cancelled", "seconds", "pending")}
        d["indexed"] = self.indexed
        d["errors"] = dict(self.errors)
        return d


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


# ------------------------------------------------------------------------------------------- building

def build_index(dataset: LabelledImageDataset | str | Path, classifier, store, ctx: JobContext | None = None,
                batch_size: int = 32, *, feature_dtype: str = "float32", loading: LoaderSettings | None = None
                ) -> ReferenceIndex:
    """Index `dataset` with `classifier` (any object satisfying the Classifier protocol) into `store`.

    Files are decoded, hashed and preprocessed on `loading.workers` threads a few batches ahead of the model
    (input_pipeline.py); each batch then takes one forward pass for probabilities and embeddings together.

    Labels are mapped onto the classifier's vocabulary first (see datasets.py). `feature_dtype` "float16"
    halves the matrix on disk (retrieval computes in float32 either way). Raises JobCancelled (message says
    how many images are indexed) when `ctx` is cancelled; completed batches stay stored.
    """
    ctx = ctx or null_context()
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if feature_dtype not in ("float32", "float16"):
        raise ValueError("feature_dtype must be 'float32' or 'float16'")
    start_time = time.perf_counter()
    if not isinstance(dataset, LabelledImageDataset):
        dataset = open_dataset(dataset)
    dataset = align_to_classifier(dataset, classifier)
    info = classifier.info
    index_id = index_id_for(dataset.root, info.model_id, info.revision)
    report = BuildReport(index_id, total=len(dataset))
    class_names = list(classifier.class_names)

    existing, errors = _open_or_create(store, index_id, dataset, info, class_names, feature_dtype)
    store.cleanup_tmp()  # temporary files of a build killed mid-write (writers still running keep theirs)
    try:
        return _update(store, index_id, dataset, classifier, class_names, existing, errors, ctx, batch_size, report,
                       start_time, loading or LoaderSettings())
    except JobCancelled:
        report.cancelled = True
        ctx.progress("Saving feature matrix", 0, None)
        consolidate(store, index_id, remove_orphans=True)
        with store.transaction() as conn:
            indexed = conn.execute("SELECT count(*) FROM index_entries WHERE index_id=?", (index_id,)).fetchone()[0]
        report.pending = max(0, report.total - len(report.errors) - indexed)
        report.seconds = time.perf_counter() - start_time
        raise JobCancelled(
            f"Indexing cancelled: {indexed} of {report.total} images are indexed ({report.processed} in this run); "
            "run the same command again to resume.", detail=json.dumps(report.to_dict())) from None


def _update(store, index_id, dataset, classifier, class_names, existing, errors, ctx, batch_size, report,
            start_time, loading: LoaderSettings) -> ReferenceIndex:
    from ..images import unreadable_reason

    # 1. Scan: decide per image whether it needs the classifier.
    todo: list[tuple[Path, int, float, int]] = []  # path, label, mtime, size
    touched: list[tuple[Path, int, float, int, str]] = []  # changed stat: maybe same content
    same_content: list[tuple[float, int, str]] = []
    keep_errors: dict[str, dict] = {}
    wanted = set()
    duplicates = 0
    for i, item in enumerate(dataset.items):
        if i % 4096 == 0:
            ctx.check_cancelled()
            ctx.progress("Scanning dataset", i, len(dataset))
        key = str(item.path)
        if key in wanted:  # a manifest listing a file twice: one entry per file (the first label wins)
            duplicates += 1
            continue
        wanted.add(key)
        try:
            st = item.path.stat()
            mtime, size = st.st_mtime, st.st_size
        except OSError:
            mtime, size = -1.0, -1
        old = existing.get(key)
        if old is not None:
            _sha, label, o_mtime, o_size = old
            if label != item.label:
                todo.append((item.path, item.label, mtime, size))
            elif o_mtime == mtime and o_size == size:
                report.unchanged += 1
            else:
                touched.append((item.path, item.label, mtime, size, _sha))
            continue
        err = errors.get(key)
        if err is not None and err.get("mtime") == mtime and err.get("size") == size and err.get("label") == item.label:
            keep_errors[key] = err  # same unreadable file as last time: not retried
            continue
        todo.append((item.path, item.label, mtime, size))
    ctx.progress("Scanning dataset", len(dataset), len(dataset))
    if duplicates:
        log.warning("%s lists %d file(s) more than once; each is indexed once, with its first label",
                    dataset.root, duplicates)
        report.total -= duplicates

    # 2. Stat changed but perhaps not the content (copied, touched): compare sha256 before recomputing.
    for i, (path, label, mtime, size, old_sha) in enumerate(touched):
        ctx.check_cancelled()
        ctx.progress("Checking changed files", i, len(touched))
        try:
            same = unreadable_reason(path) is None and content_hash(path) == old_sha  # never hash a FIFO
        except OSError:
            same = False
        if same:
            same_content.append((mtime, size, str(path)))
            report.unchanged += 1
        else:
            todo.append((path, label, mtime, size))

    # 3. Drop removed images and stale errors; record refreshed stats (one transaction).
    removed = [p for p in existing if p not in wanted]
    report.removed = len(removed)
    with store.transaction() as conn:
        conn.executemany("DELETE FROM index_entries WHERE index_id=? AND path=?", [(index_id, p) for p in removed])
        conn.executemany("UPDATE index_entries SET mtime=?, size=? WHERE index_id=? AND path=?",
                         [(m, s, index_id, p) for m, s, p in same_content])
        meta = meta_of(conn, index_id) or {}
        meta["errors"] = keep_errors
        meta["version"] = meta.get("version", 0) + (1 if removed else 0)
        write_meta(conn, index_id, meta)
    errors = dict(keep_errors)
    report.errors = {p: e["reason"] for p, e in errors.items()}

    # 4. Run the classifier batch by batch (decoded ahead on workers); each batch is committed on its own.
    total_todo = len(todo)
    done = 0
    ctx.progress("Indexing images", 0, total_todo)
    forward = _batch_forward(classifier)
    loader = BatchLoader(todo, batch_size, path_of=lambda t: t[0], prepare=forward.prepare, workers=loading.workers,
                         ahead=loading.ahead, draft_side=draft_side_for(classifier, loading.draft_factor))
    with closing(iter(loader)) as batches:  # leaving early (cancel, an error) stops the decode workers at once
        for loaded in batches:
            ctx.check_cancelled()
            ok = _rows(loaded, forward, class_names)
            for (path, label, mtime, size), reason in loaded.errors:
                errors[str(path)] = {"reason": reason, "mtime": mtime, "size": size, "label": label}
                report.errors[str(path)] = reason
            report.new_errors += len(loaded.errors)
            _commit_batch(store, index_id, ok, {str(t[0]): errors[str(t[0])] for t, _ in loaded.errors})
            done += len(loaded.items) + len(loaded.errors)
            report.processed += len(ok)
            ctx.progress("Indexing images", done, total_todo)

    # 5. Publish one consolidated matrix.
    ctx.progress("Saving feature matrix", 0, None)
    consolidate(store, index_id, remove_orphans=True)
    with store.transaction() as conn:
        meta = meta_of(conn, index_id) or {}
        meta["n_items"] = len(dataset)
        meta["last_build"] = {"at": time.time(), "processed": report.processed, "removed": report.removed}
        write_meta(conn, index_id, meta)
    report.seconds = time.perf_counter() - start_time
    index = ReferenceIndex.load(store, index_id)
    index.last_build = report
    ctx.progress("Saving feature matrix", 1, 1)
    return index


def align_to_classifier(dataset: LabelledImageDataset, classifier, *,
                        skip_unmatched: bool | None = None) -> LabelledImageDataset:
    """The dataset with labels as indices into the classifier's classes (so that correct = pred == label)."""
    names = list(classifier.class_names)
    if list(dataset.class_names) == names and skip_unmatched is None:
        return dataset
    wnids = getattr(classifier, "wnids", None) or dict(getattr(classifier.info, "extra", {}) or {}).get("wnids")
    return dataset.with_class_names(names, wnids=wnids, skip_unmatched=skip_unmatched)


def find_index(store, ref: str | Path, classifier=None) -> ReferenceIndex:
    """An index by id, or by dataset path (+ the classifier it was built with, which fixes the id)."""
    text = str(ref)
    with store.transaction() as conn:
        hit = conn.execute("SELECT index_id FROM indexes WHERE index_id=?", (text,)).fetchone()
        if hit is None and classifier is None:  # a path: the only index of that dataset, if unambiguous
            root = str(Path(text).expanduser().resolve())
            ids = [r[0] for r in conn.execute("SELECT index_id FROM indexes WHERE dataset_root=?", (root,))]
            hit = (ids[0],) if len(ids) == 1 else None
    if hit is not None:
        return ReferenceIndex.load(store, hit[0])
    if classifier is not None:
        index_id = index_id_for(Path(text).expanduser().resolve(), classifier.info.model_id, classifier.info.revision)
        return ReferenceIndex.load(store, index_id)
    raise StoreError(f"No reference index matches '{text}'.",
                     hint="Give an index id from `nemo index --list`, or the dataset folder / CSV it was built from "
                          "(with the classifier, if several classifiers indexed it).")


def _open_or_create(store, index_id, dataset, info, class_names, feature_dtype) -> tuple[dict, dict]:
    """Existing entries {path: (sha, label, mtime, size)} and recorded errors; creates the index row."""
    now = time.time()
    with store.transaction() as conn:
        head = conn.execute("SELECT class_names, meta FROM indexes WHERE index_id=?", (index_id,)).fetchone()
        if head is not None and json.loads(head[0] or "[]") != class_names:
            # Same model id and revision but another vocabulary: nothing stored can be trusted.
            log.warning("Class names of %s changed; rebuilding reference index %s", info.model_id, index_id)
            conn.execute("DELETE FROM index_entries WHERE index_id=?", (index_id,))
            conn.execute("DELETE FROM indexes WHERE index_id=?", (index_id,))
            head = None
        if head is None:
            # Arrays left by an index of the same id (reset above, or a delete that could not remove them) must
            # not be mistaken for this one's chunks: row numbers start again at 0.
            remove_array_files(store, index_id)
            meta = {"dataset_kind": dataset.kind, "next_row": 0, "version": 0, "errors": {},
                    "feature_dtype": feature_dtype}
            conn.execute("INSERT INTO indexes(index_id, dataset_root, classifier_id, classifier_revision, class_names, "
                         "feature_dim, features_array, created_at, updated_at, meta) VALUES (?,?,?,?,?,?,?,?,?,?)",
                         (index_id, str(dataset.root), info.model_id, info.revision, json.dumps(class_names),
                          None, None, now, now, json.dumps(meta)))
        else:
            meta = json.loads(head[1]) if head[1] else {}
            if meta.get("feature_dtype") != feature_dtype:
                meta["feature_dtype"] = feature_dtype  # applied at the next consolidation
                write_meta(conn, index_id, meta)
        existing = {p: (sha, label, mtime, size) for p, sha, label, mtime, size in conn.execute(
            "SELECT path, sha256, label, mtime, size FROM index_entries WHERE index_id=?", (index_id,))}
    return existing, dict(meta.get("errors", {}))


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


def delete_index(store, index_id: str) -> None:
    """Remove an index's rows and its arrays."""
    with store.transaction() as conn:
        conn.execute("DELETE FROM index_entries WHERE index_id=?", (index_id,))
        conn.execute("DELETE FROM indexes WHERE index_id=?", (index_id,))
        remove_array_files(store, index_id)
