"""The seed's counterfactual metrics (section 3.2): success rate, LPIPS, feature and latent cosine similarity
(means over valid pairs, as the reference), Frechet and kernel distances to a reference set, time per image.

FD/KD come from torchmetrics (FrechetInceptionDistance / KernelInceptionDistance) over a pluggable feature
extractor, by default the classifier's own features f ("FD_clf"); torchmetrics' Inception path needs
weights that may be absent, so the extractor is a module we hand it. Inputs are raw [0, 1] tensors (the
reference measured uint8 figure renderings that torchmetrics multiplied by 255 again).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .estimator import FittedEstimator, resize


def cosine(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return F.cosine_similarity(a.flatten(1).double(), b.flatten(1).double(), dim=1).cpu().numpy()


def feature_similarity(est: FittedEstimator, x: torch.Tensor, x_cf: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return cosine(est.features(x), est.features(x_cf))


def latent_similarity(est: FittedEstimator, x: torch.Tensor, x_cf: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return cosine(est.encode(x), est.encode(x_cf))


def success(competency_after: Sequence[float], threshold: float, strict: bool = False) -> np.ndarray:
    c = np.asarray(competency_after, np.float64)
    return c > threshold if strict else c >= threshold


class FeatureModule(torch.nn.Module):
    """Wraps a feature function as the nn.Module torchmetrics expects (float [0, 1] images in, (N, D) out)."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], num_features: int) -> None:
        super().__init__()
        self.fn, self.num_features = fn, int(num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.fn(x).flatten(1).double()


# torch-fidelity's Inception-v3 (the FID network) as torchmetrics loads it; a managed asset like LPIPS' trunk.
INCEPTION_FILE = "weights-inception-2015-12-05-6726825d.pth"  # torch-fidelity's release file name


def inception_path():
    from pathlib import Path

    return Path(torch.hub.get_dir()) / "checkpoints" / INCEPTION_FILE


def inception_features() -> Callable[[torch.Tensor], torch.Tensor]:
    """The 2048-d pool features of the FID Inception for [0, 1] images; MetricUnavailable when its weights are
    not in the torch hub cache (never downloaded here: FD/KD are then reported as unavailable)."""
    from .lpips_distance import MetricUnavailable

    path = inception_path()
    if not path.is_file():
        raise MetricUnavailable(f"The Inception feature space is unavailable: its weights are not in {path}.",
                                hint="Put torch-fidelity's Inception weights (the file torchmetrics' FID downloads) "
                                     "there, or use the classifier's feature space (the default).")
    from torchmetrics.image.fid import NoTrainInceptionV3

    net = NoTrainInceptionV3(name="inception-v3-compat", features_list=["2048"],
                             feature_extractor_weights_path=str(path)).eval()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return net((x.clamp(0, 1) * 255).round().to(torch.uint8).cpu())

    return fn


def feature_space(est: FittedEstimator, name: str = "classifier") -> FeatureModule:
    """'classifier' = f (the classifier's last hidden features), 'latent' = the autoencoder's g, 'inception' =
    the FID Inception's pool features (weights permitting)."""
    if name == "inception":
        return FeatureModule(inception_features(), 2048)
    fn = {"classifier": est.features, "latent": est.encode}[name]
    probe = torch.full((1, 3, *est.input_size), 0.5)
    with torch.no_grad():
        dim = fn(probe).flatten(1).shape[1]
    return FeatureModule(fn, dim)


def frechet_and_kernel_distance(features: torch.nn.Module, real: torch.Tensor, fake: torch.Tensor,
                                subset_size: int = 50, subsets: int = 100, seed: int = 0,
                                size: tuple[int, int] | None = None) -> tuple[float | None, float | None]:
    """(FD, KD) between two image sets with torchmetrics; None where a set is too small (FD needs >= 2
    images per set; KD uses subsets of min(subset_size, n) images)."""
    from torchmetrics.image.fid import FrechetInceptionDistance
    from torchmetrics.image.kid import KernelInceptionDistance

    if size is not None:
        real, fake = resize(real, size), resize(fake, size)
    n = min(len(real), len(fake))
    if n < 2:
        return None, None
    fid = FrechetInceptionDistance(feature=features, normalize=True)
    kid = KernelInceptionDistance(feature=features, normalize=True, subsets=subsets, subset_size=min(subset_size, n))
    for metric in (fid, kid):
        metric.update(real.float(), real=True)
        metric.update(fake.float(), real=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # KID draws its subsets with the global generator
        kd = float(kid.compute()[0])
    return float(fid.compute()), kd
