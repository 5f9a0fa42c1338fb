"""Session fixtures of the competency tests: the digits world and one fitted estimator (seconds on a CPU)."""
from __future__ import annotations

import pytest

from fixtures_tiny.competency_world import TINY, build_world

from nemo_desktop.core.analyses.competency import CompetencyEstimatorFit, EstimatorConfig


@pytest.fixture(scope="session")
def world():
    import torch

    # One thread: on a shared 2-core machine two threads spin against each other (measured 20x slower).
    torch.set_num_threads(1)
    return build_world()


@pytest.fixture(scope="session")
def fitted(world, tmp_path_factory):
    """(EstimatorFitResult, FittedEstimator) fitted once per session."""
    fit = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**TINY),
                                 work_dir=tmp_path_factory.mktemp("fit-work"))
    result = fit(world.fit_images, world.fit_labels)
    return result, fit.estimator


@pytest.fixture(scope="session")
def rand_lpips():
    """The real lpips.LPIPS network with a random AlexNet trunk (no download): plumbing and gradients."""
    import lpips

    from nemo_desktop.core.analyses.competency import LpipsDistance

    return LpipsDistance(lpips.LPIPS(net="alex", pretrained=True, pnet_rand=True, verbose=False))


@pytest.fixture(scope="session")
def low_batch(world, fitted):
    """20 fixed low-competency images: 10 unseen nines and 10 noisy or pixelated in-distribution digits."""
    from nemo_desktop.core.analyses.competency.causes import find_low_competency

    _, est = fitted
    nines = [im for im, s in zip(world.nines, est.score(world.nines)) if s.competency < 0.9][:10]

    def rho(ims):
        return [s.competency for s in est.score(ims)]

    noisy = [m for _, _, m in find_low_competency(world.test_images[:40], "noise", rho)][:5]
    pix = [m for _, _, m in find_low_competency(world.test_images[40:80], "pixelation", rho)][:5]
    images = nines + noisy + pix
    assert len(images) == 20
    return images
