"""Competency of every image of a set (kind "dataset", analysis "competency-score"): the per-image scores a
dataset browser shows as a column, and a summary of how many images are low because the classifier is unsure,
because they are unfamiliar, or both. With labels it also says whether competency tracks correctness.

    scores = build_analysis("competency-score", Components(classifier=clf, fitted=estimator, store=store))
    result = scores(dataset_or_folder_or_paths, ctx)          # -> CompetencyScoreSet

The result is stored under a key of the estimator's weights, the classifier, the images' content (and labels)
and the threshold; a re-run is answered from the store.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from .... import __version__
from ...base.errors import ConfigError, NemoError
from ...base.job_context import JobContext, null_context
from ...results import Record, ResultBase
from .config import _check_ranges, config_dict
from .results import CompetencyScore, low_part

ANALYSIS = "competency-score"
VERSION = "1"
BATCH = 64


@dataclass(frozen=True)
class CompetencyScoreConfig:
    threshold: float = field(default=0.9, metadata={
        "label": "Competency threshold", "min": 0.0, "max": 1.0,
        "help": "Images below it count as low competency; a part below it (confidence, P(in-distribution)) "
                "marks the model unsure or the image unfamiliar (reference: 0.9)."})

    def __post_init__(self) -> None:
        _check_ranges(self)


@dataclass
class ScoredImage(Record):
    path: str
    score: CompetencyScore
    true_index: int | None = None  # when the set is labelled (mapped onto the classifier's classes)

    @property
    def correct(self) -> bool | None:
        return None if self.true_index is None else self.score.pred_index == self.true_index


@dataclass
class CompetencyScoreSet(ResultBase):
    items: list[ScoredImage]
    threshold: float
    failed: dict[str, str] = field(default_factory=dict)  # path -> why it could not be scored (unreadable, ...)
    manifest: dict[str, Any] = field(default_factory=dict)
    result_key: str | None = None
    kind: str = "dataset"
    analysis: str = ANALYSIS

    def summary(self) -> dict[str, Any]:
        """Counts (each with its n) of low-competency images and which part is low; accuracy by competency."""
        t = self.threshold
        low = [i for i in self.items if i.score.competency < t]
        parts = [low_part(i.score, t) for i in low]
        # n_unsure / n_unfamiliar count every low image with that part low (n_both in each); n_product the low
        # images with neither part low. n_low = n_unsure + n_unfamiliar - n_both + n_product.
        out: dict[str, Any] = {"n": len(self.items), "n_low": len(low),
                               "n_unsure": sum(p in ("unsure", "both") for p in parts),
                               "n_unfamiliar": sum(p in ("unfamiliar", "both") for p in parts),
                               "n_both": parts.count("both"), "n_product": parts.count("product"),
                               "mean_competency": (sum(i.score.competency for i in self.items) / len(self.items)
                                                   if self.items else None)}
        labelled = [i for i in self.items if i.true_index is not None]
        if labelled:
            def acc(xs):
                return (sum(bool(i.correct) for i in xs) / len(xs)) if xs else None

            lo = [i for i in labelled if i.score.competency < t]
            hi = [i for i in labelled if i.score.competency >= t]
            out.update(n_labelled=len(labelled), accuracy_low=acc(lo), n_labelled_low=len(lo),
                       accuracy_high=acc(hi), n_labelled_high=len(hi))
        return out

    def lowest(self, k: int) -> list[ScoredImage]:
        return sorted(self.items, key=lambda i: i.score.competency)[:k]


def open_image_set(path: str | os.PathLike) -> Any:
    """A labelled dataset (class folders, CSV or `fiftyone:NAME[#FIELD]`, data/sources.py) when the path is one, else
    the image files under a folder."""
    from pathlib import Path

    from ...data.datasets import open_dataset
    from ...data.sources import is_fiftyone_ref
    from ...base.images import IMAGE_EXTENSIONS

    if is_fiftyone_ref(path):
        return open_dataset(path)
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(f"No images at {p}.", hint="Give a folder of images (class folders or flat), a CSV or "
                                                       "fiftyone:NAME.")
    try:
        return open_dataset(p)
    except ConfigError:
        if not p.is_dir():
            raise
    found = sorted(f for f in p.rglob("*") if f.suffix.lower() in IMAGE_EXTENSIONS and f.is_file())
    if not found:
        raise ConfigError(f"No image files under {p}.")
    return found


class CompetencyScoreAnalysis:
    """`competency-score`: competency and its parts for every image of a set."""

    def __init__(self, classifier: Any, fitted: Any, store: Any = None,
                 config: CompetencyScoreConfig | None = None) -> None:
        from .analyses import resolve_estimator

        self.estimator = resolve_estimator(fitted, classifier, store)
        self.store = store
        self.config = config or CompetencyScoreConfig()

    def _items(self, images: Any) -> tuple[list[Any], list[int] | None, str | None]:
        """(images, labels or None, why the labels are not used)."""
        if isinstance(images, (str, os.PathLike)):
            images = open_image_set(images)
        if hasattr(images, "with_class_names"):  # a labelled dataset: labels onto the classifier's classes
            try:
                mapped = images.with_class_names(self.estimator.class_names)
            except ConfigError as exc:  # e.g. a folder of images of unknown classes: scored without labels
                return list(images.paths), None, exc.message
            return list(mapped.paths), [int(y) for y in mapped.labels], None
        return list(images), None, None

    def _key(self, paths: list[Any], labels: list[int] | None) -> tuple[str, str]:
        """(results-store key, images fingerprint); the fingerprint reads every file's content hash."""
        from ...methods.intervention import model_part
        from ...store import result_key
        from .fit import dataset_fingerprint

        est = self.estimator
        fingerprint = dataset_fingerprint(paths, labels if labels is not None else [-1] * len(paths))
        key = result_key(ANALYSIS, version=VERSION, estimator=est.manifest.get("weights_sha256"),
                         classifier=model_part(est.classifier.info), images=fingerprint,
                         labelled=labels is not None, config=config_dict(self.config))
        return key, fingerprint

    def _load(self, key: str) -> CompetencyScoreSet | None:
        if self.store is None or (done := self.store.get(key)) is None:
            return None
        result = CompetencyScoreSet.from_dict(done.payload)
        result.result_key = key
        return result

    def stored(self, images: Any) -> CompetencyScoreSet | None:
        """The stored scores of `images` when they were computed before (nothing is scored)."""
        paths, labels, _ = self._items(images)
        return self._load(self._key(paths, labels)[0]) if paths else None

    def __call__(self, images: Any, ctx: JobContext | None = None) -> CompetencyScoreSet:
        from pathlib import Path

        from ...base.images import load_image
        from ...methods.intervention import model_part

        ctx = ctx or null_context()
        paths, labels, unlabelled_why = self._items(images)
        if not paths:
            raise ConfigError("There are no images to score.")
        est = self.estimator
        key, fingerprint = self._key(paths, labels)
        if (done := self._load(key)) is not None:
            ctx.progress("Loaded from the results store", 1, 1)
            return done
        items, failed = [], {}
        starts = range(0, len(paths), BATCH)
        for s in ctx.track(starts, stage="Scoring competency", total=len(starts)):
            # Each file is decoded on its own, so an unreadable one fails alone; the readable ones are then
            # scored together. They must stay one batch: CPU kernels sum in a different order for another batch
            # size, so scoring them one by one (as this once did after a failure) moved a score in the 8th
            # digit just because an unreadable file was among the inputs.
            readable, decoded = [], []
            for i in range(s, min(s + BATCH, len(paths))):
                try:
                    p = paths[i]
                    decoded.append(load_image(Path(p)) if isinstance(p, (str, os.PathLike)) else p)
                except NemoError as exc:
                    failed[str(paths[i])] = exc.message
                else:
                    readable.append(i)
            scores = est.scores_from_tensor(est.unit(decoded)) if decoded else []
            items += [ScoredImage(str(paths[i]), sc, None if labels is None else labels[i])
                      for i, sc in zip(readable, scores)]
        result = CompetencyScoreSet(items, self.config.threshold, failed=failed, manifest={
            "analysis": ANALYSIS, "version": VERSION, "app_version": __version__,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "complete": True,
            "estimator": {"weights_sha256": est.manifest.get("weights_sha256"),
                          "dataset": est.manifest.get("dataset")},
            "classifier": model_part(est.classifier.info), "images_fingerprint": fingerprint,
            "labelled": labels is not None, "labels_not_used": unlabelled_why, "config": asdict(self.config)})
        if self.store is not None:
            result.result_key = key
            self.store.put(key, ANALYSIS, result.to_dict())
        return result
