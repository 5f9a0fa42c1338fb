"""A fitted PaRCE estimator: the classifier (injected), the autoencoder, the class statistics and calibration,
and the LNN bank (latents and competencies of the calibration images). Saved as safetensors + JSON.

    est = FittedEstimator.load(folder, classifier)
    est.score(images)                     # -> [CompetencyScore]
    est.competency(x)                     # differentiable: dict of tensors for (N,3,H,W) in [0, 1]
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from ...base.errors import ConfigError, NemoError
from ...base.job_context import JobContext, null_context
from .autoencoder import ConvAutoencoder
from .classifier_view import require_differentiable
from .parce import Calibration, ClassStatistics, competency_torch, reconstruction_losses
from .results import ESTIMATOR_ANALYSIS, CompetencyScore

WEIGHTS_FILE = "estimator.safetensors"
MANIFEST_FILE = "estimator.json"
FORMAT = "nemo-competency-estimator/v1"


def resize(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear (antialiased when shrinking) resize; identity at the same size, so exact paths stay exact."""
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    shrink = size[0] < x.shape[-2] or size[1] < x.shape[-1]
    return F.interpolate(x, size=tuple(size), mode="bilinear", align_corners=False, antialias=shrink)


class FittedEstimator:
    def __init__(self, classifier: Any, autoencoder: ConvAutoencoder, statistics: ClassStatistics,
                 calibration: Calibration, *, mean_shift: float, input_size: tuple[int, int],
                 bank_latents: torch.Tensor, bank_competency: torch.Tensor, manifest: dict[str, Any]) -> None:
        self.classifier = require_differentiable(classifier)
        self.autoencoder = autoencoder.eval()
        for p in self.autoencoder.parameters():
            p.requires_grad_(False)
        self.statistics, self.calibration = statistics, calibration
        self.mean_shift = float(mean_shift)
        self.input_size = (int(input_size[0]), int(input_size[1]))  # the classifier's unit-tensor size
        self.bank_latents, self.bank_competency = bank_latents, bank_competency
        self.manifest = manifest

    # -- sizes and tensors --------------------------------------------------------------------------------
    @property
    def ae_size(self) -> tuple[int, int]:
        return (self.autoencoder.image_size, self.autoencoder.image_size)

    @property
    def class_names(self) -> list[str]:
        return list(self.classifier.class_names)

    def unit(self, images: Sequence[Any]) -> torch.Tensor:
        """PIL images or image paths -> the classifier's [0, 1] tensor."""
        from ...base.images import load_image

        return self.classifier.unit_tensor([load_image(Path(im)) if isinstance(im, (str, os.PathLike)) else im
                                            for im in images])

    def _ae(self, device: torch.device) -> ConvAutoencoder:
        if next(self.autoencoder.parameters()).device != device:
            self.autoencoder.to(device)
        return self.autoencoder

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self._ae(x.device).encode(resize(x, self.ae_size))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self._ae(z.device).decode(z)

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        return self._ae(x.device)(resize(x, self.ae_size))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier.features_from_unit(resize(x, self.input_size))

    # -- competency ---------------------------------------------------------------------------------------
    def competency(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """rho and its parts for images x (N, 3, H, W) in [0, 1] at any size; differentiable in x."""
        probs = torch.softmax(self.classifier.logits_from_unit(resize(x, self.input_size)).float(), dim=1)
        xa = resize(x, self.ae_size).float()
        losses = reconstruction_losses(self._ae(xa.device), xa)
        rho, pid = competency_torch(probs, losses, self.statistics, self.calibration.z, self.mean_shift)
        return {"competency": rho, "confidence": probs.max(dim=1).values, "id_probability": pid,
                "loss": losses, "probs": probs}

    def scores_from_tensor(self, x: torch.Tensor) -> list[CompetencyScore]:
        with torch.no_grad():
            parts = {k: v.detach().cpu().double().numpy() for k, v in self.competency(x).items()}
        names = self.class_names
        mu, sd = np.asarray(self.statistics.mean), np.asarray(self.statistics.std)
        out = []
        for i in range(len(parts["competency"])):
            c = int(parts["probs"][i].argmax())
            loss = float(parts["loss"][i])
            out.append(CompetencyScore(float(parts["competency"][i]), float(parts["confidence"][i]),
                                       float(parts["id_probability"][i]), loss, float((loss - mu[c]) / sd[c]), c,
                                       names[c]))
        return out

    def score(self, images: Sequence[Any], ctx: JobContext | None = None, batch_size: int = 64) -> list[CompetencyScore]:
        """Competency of PIL images, in batches (progress and cancel between batches)."""
        ctx = ctx or null_context()
        images = list(images)
        out: list[CompetencyScore] = []
        starts = range(0, len(images), batch_size)
        for s in ctx.track(starts, stage="Scoring competency", total=len(starts)):
            out += self.scores_from_tensor(self.unit(images[s:s + batch_size]))
        return out

    # -- persistence --------------------------------------------------------------------------------------
    def tensors(self) -> dict[str, torch.Tensor]:
        t = {f"ae.{k}": v.detach().cpu().contiguous() for k, v in self.autoencoder.state_dict().items()}
        t["bank.latents"] = self.bank_latents.detach().cpu().float().contiguous()
        t["bank.competency"] = self.bank_competency.detach().cpu().double().contiguous()
        return t

    def weights_bytes(self) -> bytes:
        return save_safetensors(self.tensors(), metadata={"format": FORMAT})

    def save(self, directory: str | os.PathLike) -> Path:
        """Write estimator.safetensors and estimator.json (atomically each) into `directory`."""
        from ...store import atomic_write_bytes, atomic_write_text

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(d / WEIGHTS_FILE, self.weights_bytes())
        atomic_write_text(d / MANIFEST_FILE, json.dumps(self.manifest, indent=2, ensure_ascii=False))
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike, classifier: Any, *, check_classifier: bool = True) -> "FittedEstimator":
        from ...base.confine import check_file

        d = Path(directory)
        try:
            for name in (MANIFEST_FILE, WEIGHTS_FILE):  # a server's roots: a file linked from outside is refused
                check_file(d / name, "estimator file")
            manifest = json.loads((d / MANIFEST_FILE).read_text(encoding="utf-8"))
            data = (d / WEIGHTS_FILE).read_bytes()
        except FileNotFoundError as exc:
            raise ConfigError(f"No competency estimator in {d}: {exc.filename} is missing.",
                              hint="Fit an estimator first, or point to the folder that holds "
                                   f"{WEIGHTS_FILE} and {MANIFEST_FILE}.") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"The estimator manifest {d / MANIFEST_FILE} is not valid JSON ({exc}).") from None
        return cls.from_parts(manifest, data, classifier, check_classifier=check_classifier)

    @classmethod
    def from_parts(cls, manifest: dict[str, Any], weights: bytes, classifier: Any, *,
                   check_classifier: bool = True) -> "FittedEstimator":
        if manifest.get("format") != FORMAT or manifest.get("analysis") != ESTIMATOR_ANALYSIS:
            raise ConfigError(f"Not a competency estimator manifest (format {manifest.get('format')!r}).")
        if check_classifier:
            _check_classifier(manifest, classifier)
        try:
            tensors = load_safetensors(weights)
        except Exception as exc:  # noqa: BLE001 - any decoding failure is a corrupt file to the user
            raise ConfigError(f"The estimator weights cannot be read: {exc}") from None
        ae = ConvAutoencoder.from_architecture(manifest["architecture"])
        ae.load_state_dict({k[3:]: v for k, v in tensors.items() if k.startswith("ae.")})
        return cls(classifier, ae, ClassStatistics.from_dict(manifest["statistics"]),
                   Calibration.from_dict(manifest["calibration"]), mean_shift=manifest["mean_shift"],
                   input_size=tuple(manifest["input_size"]), bank_latents=tensors["bank.latents"],
                   bank_competency=tensors["bank.competency"], manifest=manifest)

    @classmethod
    def from_store(cls, store: Any, key: str, classifier: Any) -> "FittedEstimator":
        """The estimator of a stored fit result (kind "fit", analysis "competency-estimator")."""
        from .results import EstimatorFitResult

        stored = store.get(key)
        if stored is None or stored.payload.get("analysis") != ESTIMATOR_ANALYSIS:
            raise ConfigError(f"No competency estimator is stored under {key[:12]}.",
                              hint="Fit one first; list the stored estimators in the model manager.")
        result = EstimatorFitResult.from_dict(stored.payload)
        return cls.from_parts(result.manifest, stored.artifact_bytes(result.weights_artifact), classifier)


def _check_classifier(manifest: dict[str, Any], classifier: Any) -> None:
    want = manifest.get("classifier") or {}
    info = classifier.info
    if (want.get("id"), want.get("revision")) != (info.model_id, info.revision):
        raise NemoError(f"This competency estimator was fitted for {want.get('id')} (revision "
                        f"{want.get('revision')}), not for {info.model_id} (revision {info.revision}).",
                        hint="Load the classifier it was fitted for, or fit a new estimator for this one.")
    if list(manifest.get("class_names", [])) != list(classifier.class_names):
        raise NemoError("The classifier's class names differ from those the estimator was fitted with.",
                        hint="Fit a new estimator for this classifier.")
