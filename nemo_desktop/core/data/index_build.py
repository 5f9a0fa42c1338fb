"""Building a reference index: scan the dataset against the stored rows, run the classifier over what is new or
changed (one committed batch at a time, index_batches.py), then publish one consolidated matrix. The design and
the on-disk layout are described in reference_index.py, which re-exports this module's public names."""
from __future__ import annotations

import json
import logging
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.confine import OUTSIDE
from ..base.errors import JobCancelled
from ..base.job_context import JobContext, null_context
from ..store.keys import content_hash
from .datasets import LabelledImageDataset, open_dataset
from .index_batches import _batch_forward, _commit_batch, _DeviceForward, _rows
from .index_files import consolidate, meta_of, remove_array_files, write_meta
from .input_pipeline import BatchLoader, LoaderSettings, draft_side_for

if TYPE_CHECKING:
    from .reference_index import ReferenceIndex

log = logging.getLogger("nemo_desktop.core.data.reference_index")  # the name these messages always had


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
    notes: list[str] = field(default_factory=list)  # e.g. why decode "gpu" ran on the CPU

    @property
    def indexed(self) -> int:
        return self.total - len(self.errors) - self.pending

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("index_id", "total", "processed", "unchanged", "removed", "new_errors",
                                           "cancelled", "seconds", "pending", "notes")}
        d["indexed"] = self.indexed
        d["errors"] = dict(self.errors)
        return d


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
    from .reference_index import index_id_for  # here, not above: reference_index re-exports this module

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


def _forward_for(classifier, loading: LoaderSettings, store, index_id: str, report: BuildReport):
    """(forward, read) for the decode path asked for; decode "gpu" where it cannot run logs why and uses the CPU
    pipeline. The path that built the rows is recorded in the index's metadata ("decode")."""
    from .gpu_decode import gpu_decode_plan, read_for_device

    preprocess, note = gpu_decode_plan(classifier, loading.decode)
    if note:
        log.warning("%s", note)
        report.notes.append(note)
    used = "gpu" if preprocess is not None else "cpu"
    with store.transaction() as conn:
        meta = meta_of(conn, index_id) or {}
        meta.setdefault("decode", [])
        if used not in meta["decode"]:
            meta["decode"].append(used)
            write_meta(conn, index_id, meta)
    if preprocess is None:
        return _batch_forward(classifier), None
    return _DeviceForward(classifier, preprocess), read_for_device


def _update(store, index_id, dataset, classifier, class_names, existing, errors, ctx, batch_size, report,
            start_time, loading: LoaderSettings) -> ReferenceIndex:
    from ..base.images import unreadable_reason
    from .reference_index import ReferenceIndex

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
    forward, read = _forward_for(classifier, loading, store, index_id, report)
    loader = BatchLoader(todo, batch_size, path_of=lambda t: t[0], prepare=forward.prepare, workers=loading.workers,
                         ahead=loading.ahead, draft_side=draft_side_for(classifier, loading.draft_factor), read=read)
    with closing(iter(loader)) as batches:  # leaving early (cancel, an error) stops the decode workers at once
        for loaded in batches:
            ctx.check_cancelled()
            ok = _rows(loaded, forward, class_names)
            for (path, label, mtime, size), reason in loaded.errors:
                report.errors[str(path)] = reason
                if OUTSIDE not in reason:  # a server's roots refused it: not the file's fault, so not remembered
                    errors[str(path)] = {"reason": reason, "mtime": mtime, "size": size, "label": label}
            report.new_errors += len(loaded.errors)
            _commit_batch(store, index_id, ok, {str(t[0]): errors[str(t[0])] for t, _ in loaded.errors
                                                if str(t[0]) in errors})
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

