"""Fit a PaRCE competency estimator for a classifier on a labelled dataset (kind "fit").

    fit = CompetencyEstimatorFit(classifier, EstimatorConfig(epochs=50), store=store)
    result = fit(images, labels, ctx)            # -> EstimatorFitResult; fit.estimator is the FittedEstimator

Stages: "Preparing images" (per batch), "Training autoencoder" (per batch over all epochs), "Calibrating". A
stratified split keeps `calibration_fraction` of each class out of training; or, with `calibration_set` (a folder or
CSV; or `calibration=(images, labels)` passed to the call), every fit image trains the autoencoder and the
calibration set gives the class statistics and z. The manifest's `dataset.calibration` says which was used. The
autoencoder trains in the core's training loop (core/training): after each epoch the weights and Adam state are
checkpointed (safetensors) in `work_dir`; a later call with the same inputs resumes from the last finished epoch and
gives the same weights as an uninterrupted run (batch order is seeded per epoch). The finished estimator is stored
under a key of classifier id+revision, dataset fingerprint, configuration and analysis version; a re-run is answered
from the store.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from .... import __version__
from ...base.errors import ConfigError
from ...base.job_context import JobContext, null_context
from ...training import Checkpoint, TrainingLoop
from .autoencoder import ConvAutoencoder
from .classifier_view import require_differentiable
from .config import EstimatorConfig, config_dict
from .estimator import FORMAT, FittedEstimator, resize
from .parce import class_statistics, competency_np, reconstruction_losses, select_z
from .results import ESTIMATOR_ANALYSIS, ESTIMATOR_VERSION, EstimatorFitResult

VERSION = ESTIMATOR_VERSION
PREP_BATCH = 64
# Of the fit's progress bar: the classifier's pass over the images (training: most of the rest). Measured by
# benchmarks/progress_truth.py on the demo's digits (2 CPU cores): preparing 1.7 s, training 168 s, calibrating
# 0.8 s; at 0.25 the time left said a tenth of the real time once the images were prepared.
PREPARE_SHARE = 0.01
CHECKPOINT = "checkpoint.safetensors"
OLD_CHECKPOINT_STATE = "checkpoint.json"  # before issue 41: the epoch count beside the weights; refused, not resumed


def dataset_fingerprint(images: Sequence[Any], labels: Sequence[int]) -> str:
    """sha256 over the (content hash, label) pairs in order: the same files and labels give the same value."""
    from ...store import content_hash

    h = hashlib.sha256()
    for im, y in zip(images, labels):
        h.update(f"{content_hash(im)}:{int(y)};".encode())
    return h.hexdigest()


def calibration_from(path: str, class_names: Sequence[str]) -> tuple[list[Path], list[int]]:
    """(image paths, labels) of a calibration set (a class-folder tree or a CSV manifest) on the classifier's
    classes. Every error names the set; a file that is missing or not readable is a usage error found before any
    work, like a file that is not an image."""
    from ...data.datasets import UnmatchedLabelsError, open_dataset
    from ...data.sources import is_fiftyone_ref
    from ...base.errors import InputImageError
    from ...base.images import unreadable_reason

    try:
        ds = open_dataset(path).with_class_names(list(class_names))
    except UnmatchedLabelsError as exc:
        raise ConfigError(f"The calibration set {path}: {exc.message}",
                          hint="Label its images with the classifier's class names (or class indices), or leave out "
                               "the images of classes the classifier does not have.") from None
    except ConfigError as exc:
        raise ConfigError(f"The calibration set {path}: {exc.message}", hint=exc.hint) from None
    bad = [(p, why) for p in ds.paths if (why := unreadable_reason(p))]
    if bad:
        listing = "; ".join(f"{p} {why}" for p, why in bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5
                                                                    else "")
        where = "relative paths are read from the CSV's folder" if Path(path).suffix.lower() == ".csv" else \
            "the FiftyOne dataset lists them" if is_fiftyone_ref(path) else "the folder lists them"
        raise InputImageError(f"{len(bad)} image file(s) of the calibration set {path} cannot be read: {listing}.",
                              hint=f"Correct or remove them ({where}).")
    return ds.paths, ds.labels


def stratified_split(labels: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, calibration indices): `fraction` of every class with >= 2 images (at least one)."""
    rng = np.random.default_rng(seed)
    train, cal = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        k = 0 if len(idx) < 2 else min(len(idx) - 1, max(1, int(round(fraction * len(idx)))))
        cal += idx[:k].tolist()
        train += idx[k:].tolist()
    return np.sort(np.array(train, int)), np.sort(np.array(cal, int))


class CompetencyEstimatorFit:
    def __init__(self, classifier: Any, config: EstimatorConfig | None = None, *, store: Any = None,
                 work_dir: str | os.PathLike | None = None) -> None:
        self.classifier = require_differentiable(classifier)
        self.config = config or EstimatorConfig()
        self.store = store
        self.work_dir = Path(work_dir) if work_dir else None
        self.estimator: FittedEstimator | None = None  # set by a successful call

    def key(self, fingerprint: str, calibration_fingerprint: str | None = None) -> str:
        from ...store import result_key

        info = self.classifier.info
        return result_key(ESTIMATOR_ANALYSIS, version=VERSION, fingerprint=fingerprint,
                          classifier={"id": info.model_id, "family": info.family, "revision": info.revision},
                          config=config_dict(self.config), calibration=calibration_fingerprint)

    def _calibration_set(self, calibration: Any) -> tuple[list, np.ndarray, str | None] | None:
        """(images, labels, name) of the calibration set: the one passed, else the config's folder/CSV, else None."""
        if calibration is None and self.config.calibration_set:
            calibration = calibration_from(self.config.calibration_set, self.classifier.class_names)
        if calibration is None:
            return None
        images, labels = calibration
        images, y = list(images), np.asarray(labels, dtype=np.int64)
        if len(images) != len(y):
            raise ConfigError(f"The calibration set has {len(images)} images but {len(y)} labels.")
        if len(images) < 2:
            raise ConfigError(f"The calibration set needs at least 2 images (got {len(images)}).",
                              hint="Give a larger calibration set, or leave it empty to hold part of the fit set out.")
        self._check_labels(y, "calibration set")
        return images, y, self.config.calibration_set or None

    def __call__(self, images: Sequence[Any], labels: Sequence[int], ctx: JobContext | None = None, *,
                 fingerprint: str | None = None, dataset_name: str | None = None,
                 calibration: tuple[Sequence[Any], Sequence[int]] | None = None) -> EstimatorFitResult:
        ctx = ctx or null_context()
        images, y = list(images), np.asarray(labels, dtype=np.int64)
        self._validate(images, y)
        fingerprint = fingerprint or dataset_fingerprint(images, y)
        cal_set = self._calibration_set(calibration)
        cal_fp = dataset_fingerprint(cal_set[0], cal_set[1]) if cal_set else None
        key = self.key(fingerprint, cal_fp)
        if self.store is not None and (done := self.store.get(key)) is not None:
            ctx.progress("Loaded from the results store", 1, 1)
            result = EstimatorFitResult.from_dict(done.payload)
            self.estimator = FittedEstimator.from_parts(result.manifest, done.artifact_bytes(result.weights_artifact),
                                                        self.classifier)
            result.result_key = key
            return result

        cfg, start = self.config, time.perf_counter()
        n_fit = len(images)
        if cal_set is None:
            train_idx, cal_idx = stratified_split(y, cfg.calibration_fraction, cfg.seed)
            source = {"kind": "split", "fraction": cfg.calibration_fraction, "seed": cfg.seed}
        else:
            images, y = images + cal_set[0], np.concatenate([y, cal_set[1]])
            train_idx, cal_idx = np.arange(n_fit), np.arange(n_fit, len(images))
            source = {"kind": "set", "path": cal_set[2], "fingerprint": cal_fp, "n_images": len(cal_idx)}
        # One bar for the fit: preparing, training and calibrating each fill their share of it (it never refills).
        x, probs_cal, input_size = self._prepare(images, cal_idx, ctx.sub("", 0.0, PREPARE_SHARE))
        work = self.work_dir or _default_work_dir(key)
        ae, history, training_notes = self._train(x[train_idx], work, key, ctx.sub("", PREPARE_SHARE, 0.97))
        estimator, fit_warnings = self._calibrate(ae, x[cal_idx], y[cal_idx], probs_cal, input_size,
                                                  ctx.sub("", 0.97, 1.0))
        fit_warnings = training_notes + fit_warnings
        manifest = self._manifest(estimator, fingerprint, dataset_name, n_fit, len(train_idx), len(cal_idx),
                                  history, fit_warnings, time.perf_counter() - start)
        manifest["dataset"]["calibration"] = source
        estimator.manifest = manifest
        result = EstimatorFitResult(manifest=manifest, statistics=manifest["statistics"],
                                    calibration=manifest["calibration"], warnings=fit_warnings, result_key=key)
        if self.store is not None:
            self.store.put(key, ESTIMATOR_ANALYSIS, result.to_dict(), {result.weights_artifact: estimator.weights_bytes()})
        shutil.rmtree(work, ignore_errors=True)  # finished: nothing left to resume
        self.estimator = estimator
        return result

    def fit_dataset(self, dataset: Any, ctx: JobContext | None = None) -> EstimatorFitResult:
        """Fit on a labelled dataset (core.data: folder or CSV), its labels mapped onto the classifier's
        classes by name; images are decoded batch by batch."""
        mapped = dataset.with_class_names(list(self.classifier.class_names))
        return self(mapped.paths, mapped.labels, ctx, dataset_name=str(getattr(dataset, "root", "")) or None)

    # -- steps ---------------------------------------------------------------------------------------------
    def _validate(self, images: list, y: np.ndarray) -> None:
        if len(images) != len(y):
            raise ConfigError(f"{len(images)} images but {len(y)} labels were given.")
        if len(images) < 4:
            raise ConfigError(f"Fitting a competency estimator needs more images (got {len(images)}).")
        self._check_labels(y, "dataset")

    def _check_labels(self, y: np.ndarray, what: str) -> None:
        n_classes = len(self.classifier.class_names)
        bad = y[(y < 0) | (y >= n_classes)]
        if len(bad):
            raise ConfigError(f"Label {int(bad[0])} of the {what} is not a class of the classifier (it has "
                              f"{n_classes}).", hint="Map the dataset's labels to the classifier's classes first.")

    def _decode(self, image: Any, calibration: bool) -> Any:
        """The image decoded; an unreadable image of a named calibration set says which set it is in."""
        from ...base.errors import InputImageError

        try:
            return _as_image(image)
        except InputImageError as exc:
            if not (calibration and self.config.calibration_set):
                raise
            raise InputImageError(f"The calibration set {self.config.calibration_set}: {exc.message}",
                                  hint=exc.hint) from None

    def _prepare(self, images: list, cal_idx: np.ndarray, ctx: JobContext):
        """Autoencoder-size tensors of all images, and the classifier's probabilities on the calibration ones."""
        size = (self.config.image_size, self.config.image_size)
        is_cal = np.zeros(len(images), bool)
        is_cal[cal_idx] = True
        chunks, probs, input_size = [], [], None
        starts = range(0, len(images), PREP_BATCH)
        for s in ctx.track(starts, stage="Preparing images", total=len(starts)):
            batch = [self._decode(im, is_cal[s + i]) for i, im in enumerate(images[s:s + PREP_BATCH])]
            with torch.no_grad():
                u = self.classifier.unit_tensor(batch)
                input_size = tuple(u.shape[-2:])
                sel = torch.as_tensor(is_cal[s:s + PREP_BATCH], device=u.device)
                if sel.any():
                    probs.append(torch.softmax(self.classifier.logits_from_unit(u[sel]).float(), 1).cpu())
                chunks.append(resize(u, size).float().cpu())
        return torch.cat(chunks), torch.cat(probs).double().numpy(), input_size

    def _train(self, x: torch.Tensor, work: Path, key: str, ctx: JobContext):
        """The autoencoder trained in the core's training loop, resumed from `work`'s checkpoint of the same fit
        (the checkpoint an older version wrote there is refused with a note); (autoencoder, loss per epoch, notes)."""
        cfg = self.config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            ae = ConvAutoencoder.from_architecture(cfg.architecture())
        checkpoint = Checkpoint(work / CHECKPOINT, key, older=[work / OLD_CHECKPOINT_STATE])
        loop = TrainingLoop(ae, torch.optim.Adam(ae.parameters(), lr=cfg.learning_rate), epochs=cfg.epochs,
                            batch_size=cfg.batch_size, shuffle_seed=lambda epoch: cfg.seed * 100_003 + epoch - 1,
                            stage="Training autoencoder", checkpoint=checkpoint)
        loop.resume()
        loop.run(torch.arange(len(x)), lambda idx: torch.nn.functional.mse_loss(ae(x[idx]), x[idx]), ctx)
        return ae.eval(), [h["train_loss"] for h in loop.history], loop.notes

    def _calibrate(self, ae: ConvAutoencoder, x_cal: torch.Tensor, y_cal: np.ndarray, probs: np.ndarray,
                   input_size: tuple[int, int], ctx: JobContext):
        cfg = self.config
        ctx.check_cancelled()
        ctx.progress("Calibrating", 0, 1)
        with torch.no_grad():
            losses = torch.cat([reconstruction_losses(ae, x_cal[s:s + PREP_BATCH])
                                for s in range(0, len(x_cal), PREP_BATCH)]).double().numpy()
            latents = torch.cat([ae.encode(x_cal[s:s + PREP_BATCH]) for s in range(0, len(x_cal), PREP_BATCH)])
        stats, notes = class_statistics(losses, y_cal, len(self.classifier.class_names))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cal = select_z(probs, losses, y_cal, stats, cfg.mean_shift, cfg.z_max, cfg.z_step)
        notes += [str(w.message) for w in caught]
        rho, _ = competency_np(probs, losses, stats, cal.z, cfg.mean_shift)
        ctx.progress("Calibrating", 1, 1)
        est = FittedEstimator(self.classifier, ae, stats, cal, mean_shift=cfg.mean_shift, input_size=input_size,
                              bank_latents=latents, bank_competency=torch.from_numpy(rho), manifest={})
        return est, notes

    def _manifest(self, est: FittedEstimator, fingerprint: str, dataset_name: str | None, n: int, n_train: int,
                  n_cal: int, history: list[float], notes: list[str], seconds: float) -> dict[str, Any]:
        info = self.classifier.info
        weights_sha = hashlib.sha256(est.weights_bytes()).hexdigest()
        return {
            "format": FORMAT, "analysis": ESTIMATOR_ANALYSIS, "version": VERSION, "app_version": __version__,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "classifier": {"id": info.model_id, "family": info.family, "revision": info.revision},
            "class_names": list(self.classifier.class_names),
            "dataset": {"fingerprint": fingerprint, "name": dataset_name, "n_images": n, "n_train": n_train,
                        "n_calibration": n_cal},
            "architecture": self.config.architecture(), "config": config_dict(self.config),
            "input_size": list(est.input_size), "mean_shift": est.mean_shift,
            "statistics": est.statistics.to_dict(), "calibration": est.calibration.to_dict(),
            "training": {"epochs": len(history), "loss_per_epoch": history, "seconds": round(seconds, 3)},
            "weights_sha256": weights_sha, "warnings": notes,
        }


def _as_image(im: Any):
    if isinstance(im, (str, os.PathLike)):
        from ...base.images import load_image

        return load_image(Path(im))
    return im.convert("RGB") if getattr(im, "mode", "RGB") != "RGB" else im


def _default_work_dir(key: str) -> Path:
    from ...store import get_paths

    return get_paths().store_dir / "competency-checkpoints" / key[:24]
