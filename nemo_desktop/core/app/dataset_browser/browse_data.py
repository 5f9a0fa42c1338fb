"""What the dataset browser shows, as column arrays (Qt-free: built in jobs, filtered with numpy).

A dataset without a reference index shows its images and labels only. With an index (the dataset run
through a classifier, `core.data.reference_index`), every image also has the prediction, its confidence
and P(true class), and the filters on correctness and prediction apply. The arrays of an index are about
40 bytes per image, so 100,000 images cost a few megabytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nemo_desktop.core.base.job_context import JobContext


@dataclass
class BrowseData:
    root: str
    class_names: list[str]
    paths: np.ndarray  # object (str)
    labels: np.ndarray  # int64, index into class_names
    preds: np.ndarray  # int64, -1 when not indexed
    conf: np.ndarray  # float32 P(prediction), NaN when not indexed
    prob_true: np.ndarray  # float32 P(true class), NaN when not indexed
    sha256: np.ndarray | None = None  # object (str) content hashes (indexed images): thumbnail cache keys
    index_id: str | None = None
    classifier_id: str | None = None
    not_indexed: int | None = 0  # dataset images the index does not hold (new since it was built); None: unknown
    errors: dict[str, str] = field(default_factory=dict)  # unreadable images: path -> reason
    indexes: list[dict] = field(default_factory=list)  # every index of this dataset (ReferenceIndex.list rows)
    skipped_labels: dict[str, str] = field(default_factory=dict)  # labels the classifier does not know
    # Competency column (competency_column.py): float32 per row, NaN where not scored; None when not shown.
    competency: np.ndarray | None = None
    competency_parts: np.ndarray | None = None  # (n, 2) float32: classifier confidence, P(in-distribution)
    competency_threshold: float = 0.9  # the threshold the shown scores were computed and are labelled at

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def indexed(self) -> bool:
        return self.index_id is not None

    @property
    def correct(self) -> np.ndarray:
        return self.preds == self.labels

    def prediction_warning(self) -> str | None:
        """One class takes most predictions: the classifier's preprocessing is probably wrong."""
        if not self.indexed:
            return None
        from nemo_desktop.core.data.prediction_check import dominant_prediction_warning

        return dominant_prediction_warning(self.preds, self.labels, self.class_names)


def from_dataset(dataset, ctx: JobContext | None = None) -> BrowseData:
    n = len(dataset.items)
    paths = np.empty(n, object)
    paths[:] = [str(it.path) for it in dataset.items]
    labels = np.fromiter((it.label for it in dataset.items), np.int64, n)
    return BrowseData(str(dataset.root), list(dataset.class_names), paths, labels, np.full(n, -1, np.int64),
                      np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32),
                      skipped_labels=dict(getattr(dataset, "skipped_labels", {}) or {}))


def count_not_indexed(dataset, paths: np.ndarray, errors: dict) -> int:
    indexed = set(paths.tolist())
    return sum(1 for it in dataset.items if str(it.path) not in indexed and str(it.path) not in errors)


def from_index(index, dataset=None, indexes: list[dict] | None = None) -> BrowseData:
    """The index's entries grouped by true class (stable: inside a class, the index's own order).
    Without `dataset`, `not_indexed` is unknown (None) until `count_not_indexed` is run."""
    e = index.entries
    order = np.argsort(e.labels, kind="stable")
    not_indexed = count_not_indexed(dataset, e.paths, index.errors) if dataset is not None else None
    return BrowseData(index.dataset_root or (str(dataset.root) if dataset is not None else ""),
                      list(index.class_names), e.paths[order], e.labels[order], e.preds[order],
                      e.prob_pred[order].astype(np.float32), e.prob_label[order].astype(np.float32),
                      sha256=e.sha256[order], index_id=index.index_id, classifier_id=index.classifier_id,
                      not_indexed=not_indexed, errors=dict(index.errors), indexes=list(indexes or []),
                      skipped_labels=dict(getattr(dataset, "skipped_labels", {}) or {}))


def indexes_of(store, root: str) -> list[dict]:
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    return [r for r in ReferenceIndex.list(store) if r["dataset_root"] == root]


def _choose(indexes: list[dict], prefer_classifier: str | None, index_id: str | None) -> dict | None:
    return next((r for r in indexes if r["index_id"] == index_id), None) or \
        next((r for r in indexes if prefer_classifier and r["classifier_id"] == prefer_classifier), None) or \
        (indexes[0] if indexes else None)


def open_indexed(path: str | Path, store, ctx: JobContext, *, prefer_classifier: str | None = None,
                 index_id: str | None = None) -> BrowseData | None:
    """The dataset's reference index, if it has one (the one built with `prefer_classifier`, else `index_id`,
    else the most recently updated), WITHOUT reading the dataset itself: the index holds every path, so a
    large dataset shows at once; `count_new_images` then compares it with the files (a second job)."""
    from nemo_desktop.core.data.reference_index import ReferenceIndex
    from nemo_desktop.core.data.sources import dataset_root, is_fiftyone_ref

    root = dataset_root(path)  # the root open_dataset records (a resolved path, or the canonical fiftyone: ref)
    present = is_fiftyone_ref(root) or Path(root).exists()  # a FiftyOne dataset is not looked up (its database)
    chosen = _choose(indexes_of(store, root), prefer_classifier, index_id) if present else None
    if chosen is None:
        return None
    ctx.progress("Loading the reference index", 0, None)
    index = ReferenceIndex.load(store, chosen["index_id"])
    ctx.check_cancelled()
    return from_index(index, None, indexes_of(store, root))


def open_index(index_id: str, store, ctx: JobContext) -> BrowseData:
    """One reference index by id, shown without reading its dataset (a failure mode names the index it ran on)."""
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    ctx.progress("Loading the reference index", 0, None)
    index = ReferenceIndex.load(store, index_id)
    ctx.check_cancelled()
    return from_index(index, None, indexes_of(store, index.dataset_root or ""))


def count_new_images(path: str | Path, data: BrowseData, ctx: JobContext) -> int:
    """How many images of the dataset on disk its index does not hold yet."""
    from nemo_desktop.core.data.datasets import open_dataset

    ctx.progress("Looking for new images", 0, None)
    return count_not_indexed(open_dataset(path), data.paths, data.errors)


def open_browse_data(path: str | Path, store, ctx: JobContext, *, prefer_classifier: str | None = None,
                     index_id: str | None = None) -> BrowseData:
    """Read a folder, CSV manifest or FiftyOne dataset (data/sources.py); show it through its index when one exists
    (see open_indexed)."""
    from nemo_desktop.core.data.datasets import open_dataset
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    ctx.progress("Reading the dataset", 0, None)
    dataset = open_dataset(path)
    ctx.check_cancelled()
    indexes = indexes_of(store, str(dataset.root))
    chosen = _choose(indexes, prefer_classifier, index_id)
    if chosen is None:
        return from_dataset(dataset)
    ctx.progress("Loading the reference index", 0, None)
    index = ReferenceIndex.load(store, chosen["index_id"])
    ctx.check_cancelled()
    return from_index(index, dataset, indexes)


# Relative cost of indexing's stages, from benchmarks/progress_truth.py (the demo's 360 digits on 2 busy CPU cores:
# reading 0.08 s, scanning 0.01 s, indexing 0.95 s, saving 0.16 s); a dataset indexed before only scans and checks.
INDEX_STAGE_WEIGHTS = {"Reading the dataset": 1, "Scanning dataset": 1, "Checking changed files": 1,
                       "Indexing images": 12, "Saving feature matrix": 2}
LOADING_SHARE = 0.15  # of the bar, for loading the classifier first (the demo's: ~0.2 s of ~1.5 s)


def index_dataset(root: str, session: Any, ctx: JobContext, batch_size: int = 32) -> BrowseData:
    """Run the dataset through the current classifier into a reference index (GPU lane); resumable."""
    from nemo_desktop.core.data.datasets import open_dataset
    from nemo_desktop.core.data.reference_index import align_to_classifier, build_index

    # One bar for the whole job: loading the classifier (when it is not in memory yet) and then each stage fill
    # their own share, so the bar never says 100 % while images are still being indexed.
    start = 0.0 if "classifier" in session.loaded() else LOADING_SHARE
    classifier = session.ensure("classifier", ctx.sub("", 0.0, start))
    ctx = ctx.stages("", start, 1.0, INDEX_STAGE_WEIGHTS)
    ctx.progress("Reading the dataset", 0, None)
    dataset = align_to_classifier(open_dataset(root), classifier, skip_unmatched=True)
    store = session.store()
    index = build_index(dataset, classifier, store, ctx, batch_size=batch_size)
    return from_index(index, dataset, indexes_of(store, str(dataset.root)))


def index_dataset_job(session: Any, root: str, batch_size: int, ctx: JobContext) -> BrowseData:
    """`index_dataset` as a model job (`JobSpec`: the session first), for the model worker process."""
    return index_dataset(root, session, ctx, batch_size=batch_size)
