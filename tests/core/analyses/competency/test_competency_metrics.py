"""FD/KD (through torchmetrics with our feature module) against independent oracles, and the bench table."""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.linalg
import torch

from nemo_desktop.core.analyses.competency import CompetencyBenchResult, CounterfactualConfig
from nemo_desktop.core.analyses.competency.bench import CompetencyBench
from nemo_desktop.core.analyses.competency.metrics import FeatureModule, frechet_and_kernel_distance


def _fd_oracle(a, b):
    mu1, mu2 = a.mean(0), b.mean(0)
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = scipy.linalg.sqrtm(s1 @ s2).real
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def _kd_oracle(a, b):
    d = a.shape[1]
    k = lambda x, y: (x @ y.T / d + 1) ** 3  # noqa: E731
    m = len(a)
    kxx, kyy, kxy = k(a, a), k(b, b), k(a, b)
    return float((kxx.sum() - np.trace(kxx)) / (m * (m - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
                 - 2 * kxy.mean())


def test_fd_and_kd_match_oracles():
    proj = torch.randn(3 * 4 * 4, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    fn = lambda x: x.flatten(1).double() @ proj  # noqa: E731
    feats = FeatureModule(fn, 6)
    g = torch.Generator().manual_seed(1)
    real, fake = torch.rand(40, 3, 4, 4, generator=g), torch.rand(40, 3, 4, 4, generator=g) ** 2
    fd, kd = frechet_and_kernel_distance(feats, real, fake, subset_size=40, subsets=1)
    a, b = fn(real).numpy(), fn(fake).numpy()
    assert fd == pytest.approx(_fd_oracle(a, b), rel=1e-5)
    assert kd == pytest.approx(_kd_oracle(a, b), rel=1e-6, abs=1e-9)
    same, _ = frechet_and_kernel_distance(feats, real, real, subset_size=40, subsets=1)
    assert abs(same) < 1e-6
    assert frechet_and_kernel_distance(feats, real[:1], fake[:1]) == (None, None)


def test_bench_reproduces_the_shape_of_table_1(fitted, low_batch, world, rand_lpips):
    _, est = fitted
    cfg = CounterfactualConfig(max_iter=40)
    result = CompetencyBench(est, cfg, lpips=rand_lpips)(low_batch[:10] + world.test_images[:5],
                                                          world.test_images[100:160])
    assert [r.method for r in result.rows] == ["orig", "igd", "fgd", "reco", "lgd", "lnn"]
    orig = result.row("orig")
    assert orig.n == result.manifest["n_low_competency"] and orig.success_rate == 0.0
    assert orig.lpips == pytest.approx(0, abs=1e-6) and orig.feature_similarity == pytest.approx(1)
    for r in result.rows[1:]:
        assert r.n == orig.n and 0 <= r.success_rate <= 1 and r.seconds_per_image > 0 and r.fd is not None
    assert result.row("lgd").success_rate >= result.row("reco").success_rate
    # realism: the autoencoder-based counterfactuals are closer to the reference set than the originals
    assert result.row("reco").fd < orig.fd and result.row("lgd").fd < orig.fd
    assert result.feature_space == "FD_clf" and result.n_reference == 60
    assert CompetencyBenchResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_inception_space_is_unavailable_without_weights_and_equals_torchmetrics_fid_with_them(
        fitted, low_batch, world, tmp_path, monkeypatch):
    """The FID Inception through the real torchmetrics / torch-fidelity path. No weights can be downloaded, so
    the test plants a random Inception state dict (the real architecture's keys and shapes) in a temporary
    torch hub folder; torchmetrics' own FID with feature=2048 then loads the same file."""
    from torch_fidelity.feature_extractor_inceptionv3 import FeatureExtractorInceptionV3
    from torchmetrics.image.fid import FrechetInceptionDistance, NoTrainInceptionV3

    from nemo_desktop.core.analyses.competency.metrics import inception_path

    _, est = fitted
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # not torch.hub.set_dir: that global outlives the test
    cfg = CounterfactualConfig(methods=("reco",), max_iter=5)
    images, reference = low_batch[:6], world.test_images[:8]
    missing = CompetencyBench(est, cfg, feature="inception")(images, reference)
    assert all(r.fd is None and r.kd is None for r in missing.rows)
    assert "Inception feature space is unavailable" in " ".join(missing.row("reco").notes)
    assert missing.row("reco").success_rate is not None  # the other metrics still run

    with monkeypatch.context() as m:  # build the architecture without any weights file, then save it
        m.setattr(FeatureExtractorInceptionV3, "load_state_dict", lambda self, *a, **k: None)
        m.setattr(torch, "load", lambda *a, **k: {})
        torch.manual_seed(0)
        random_net = NoTrainInceptionV3(name="inception-v3-compat", features_list=["2048"],
                                        feature_extractor_weights_path="unused")
    inception_path().parent.mkdir(parents=True)
    torch.save(random_net.state_dict(), inception_path())

    present = CompetencyBench(est, cfg, feature="inception")(images, reference)
    x = est.unit(images)
    x = x[torch.from_numpy(est.competency(x)["competency"].detach().numpy() < cfg.threshold)]
    fid = FrechetInceptionDistance(feature=2048, normalize=True)  # torchmetrics' own path, same weights file
    fid.update(est.unit(reference), real=True)
    fid.update(x, real=False)
    assert present.feature_space == "FD_inception"
    assert present.row("orig").fd == pytest.approx(float(fid.compute()), rel=1e-3, abs=1e-3)
