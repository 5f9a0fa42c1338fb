"""PaRCE competency (Pohland & Tomlin): the maximum softmax probability times the probability that the image
is in-distribution, from the autoencoder's reconstruction loss, calibrated on held-out data.

    L(X)    = mean over C,H,W of (AE(X) - X)^2                        (X in [0, 1])
    P_c(X)  = 1 - Phi((L - s*mu_c) / sigma_c - z*)                     (s = mean_shift, 2 in the reference)
    rho(X)  = max_c p_c * sum_c p_c * P_c(X)
    z*      = argmin over the grid {0, step, ..., z_max} of |mean rho_z(calibration) - accuracy(calibration)|

mu_c, sigma_c (population std) are the loss statistics of the calibration images of TRUE class c. Each
formula exists twice: numpy (scipy's normal survival function) for reports and oracles, torch (ndtr) for the
differentiable path the gradient generators need; tests check that both agree.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.stats import norm


@dataclass(frozen=True)
class ClassStatistics:
    """Per-class reconstruction-loss statistics of the calibration split (index = class index)."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    count: tuple[int, ...]
    pooled: tuple[bool, ...]  # True where the class had < 2 images or zero spread: pooled values used
    pooled_mean: float
    pooled_std: float

    def to_dict(self) -> dict:
        return {"mean": list(self.mean), "std": list(self.std), "count": list(self.count),
                "pooled": list(self.pooled), "pooled_mean": self.pooled_mean, "pooled_std": self.pooled_std}

    @classmethod
    def from_dict(cls, d: dict) -> "ClassStatistics":
        return cls(tuple(d["mean"]), tuple(d["std"]), tuple(d["count"]), tuple(d["pooled"]),
                   float(d["pooled_mean"]), float(d["pooled_std"]))


@dataclass(frozen=True)
class Calibration:
    z: float
    accuracy: float  # classifier accuracy on the calibration split
    mean_competency: float  # mean rho at z
    at_bound: bool  # z* is the last grid value: the search range may be too short
    grid: tuple[float, ...] = field(default=())
    curve: tuple[float, ...] = field(default=())  # mean rho at each grid value (the calibration plot)

    def to_dict(self) -> dict:
        return {"z": self.z, "accuracy": self.accuracy, "mean_competency": self.mean_competency,
                "at_bound": self.at_bound, "grid": list(self.grid), "curve": list(self.curve)}

    @classmethod
    def from_dict(cls, d: dict) -> "Calibration":
        return cls(float(d["z"]), float(d["accuracy"]), float(d["mean_competency"]), bool(d["at_bound"]),
                   tuple(d.get("grid", ())), tuple(d.get("curve", ())))


def class_statistics(losses: np.ndarray, labels: np.ndarray, n_classes: int) -> tuple[ClassStatistics, list[str]]:
    """Per-class mean and population std of the losses; classes with < 2 images or zero spread take the
    pooled statistics (the reference would give NaN) and a warning says which."""
    losses = np.asarray(losses, np.float64)
    labels = np.asarray(labels)
    pooled_mean, pooled_std = float(losses.mean()), float(losses.std())
    if not pooled_std > 0:
        raise ValueError("all calibration losses are equal; the autoencoder learned nothing usable")
    mean, std, count, pooled, notes = [], [], [], [], []
    for c in range(n_classes):
        x = losses[labels == c]
        ok = len(x) >= 2 and float(x.std()) > 0
        mean.append(float(x.mean()) if ok else pooled_mean)
        std.append(float(x.std()) if ok else pooled_std)
        count.append(int(len(x)))
        pooled.append(not ok)
        if not ok:
            notes.append(f"class {c} has {len(x)} calibration image(s)"
                         f"{' with identical losses' if len(x) >= 2 else ''}: pooled statistics are used for it")
    return ClassStatistics(tuple(mean), tuple(std), tuple(count), tuple(pooled), pooled_mean, pooled_std), notes


# -- numpy path ---------------------------------------------------------------------------------------------
def id_probabilities_np(losses: np.ndarray, stats: ClassStatistics, z: float, mean_shift: float) -> np.ndarray:
    """(N, C) P_c(X) for each image and class."""
    L = np.asarray(losses, np.float64)[:, None]
    mu, sd = np.asarray(stats.mean)[None], np.asarray(stats.std)[None]
    return norm.sf((L - mean_shift * mu) / sd - z)


def competency_np(probs: np.ndarray, losses: np.ndarray, stats: ClassStatistics, z: float,
                  mean_shift: float) -> tuple[np.ndarray, np.ndarray]:
    """(rho, P(ID)) per image, where P(ID) = sum_c p_c P_c."""
    p = np.asarray(probs, np.float64)
    pid = (p * id_probabilities_np(losses, stats, z, mean_shift)).sum(axis=1)
    return p.max(axis=1) * pid, pid


# -- torch path (differentiable) ----------------------------------------------------------------------------
def competency_torch(probs: torch.Tensor, losses: torch.Tensor, stats: ClassStatistics, z: float,
                     mean_shift: float) -> tuple[torch.Tensor, torch.Tensor]:
    mu = torch.as_tensor(stats.mean, dtype=losses.dtype, device=losses.device)[None]
    sd = torch.as_tensor(stats.std, dtype=losses.dtype, device=losses.device)[None]
    p_c = torch.special.ndtr(-((losses[:, None] - mean_shift * mu) / sd - z))  # 1 - Phi(u) = Phi(-u)
    pid = (probs * p_c).sum(dim=1)
    return probs.max(dim=1).values * pid, pid


def select_z(probs: np.ndarray, losses: np.ndarray, labels: np.ndarray, stats: ClassStatistics,
             mean_shift: float, z_max: float, z_step: float) -> Calibration:
    """The grid value of z whose mean competency on the calibration split is closest to its accuracy
    (first on ties). z >= 0, so calibration can only raise scores; hitting z_max is flagged."""
    n = int(np.floor(z_max / z_step + 1e-9)) + 1
    grid = np.round(np.arange(n) * z_step, 10)
    accuracy = float((np.asarray(probs).argmax(axis=1) == np.asarray(labels)).mean())
    curve = np.array([competency_np(probs, losses, stats, float(z), mean_shift)[0].mean() for z in grid])
    best = int(np.argmin(np.abs(curve - accuracy)))
    at_bound = best == n - 1 and n > 1
    if at_bound:
        warnings.warn(f"competency calibration stopped at the end of its search range (z = {grid[best]:.2f}): "
                      f"mean competency {curve[best]:.3f} vs accuracy {accuracy:.3f}", RuntimeWarning, stacklevel=2)
    return Calibration(float(grid[best]), accuracy, float(curve[best]), bool(at_bound),
                       tuple(float(g) for g in grid), tuple(float(c) for c in curve))


def reconstruction_losses(autoencoder: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Per-image mean squared reconstruction error (N,)."""
    return ((autoencoder(x) - x) ** 2).flatten(1).mean(dim=1)
