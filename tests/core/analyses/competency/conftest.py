"""Session fixtures of the competency tests: the digits world and one fitted estimator (seconds on a CPU)."""
from __future__ import annotations

import pytest

from competency_world import build_world

from nemo_desktop.core.analyses.competency import CompetencyEstimatorFit, EstimatorConfig

# Small but real: 16 px autoencoder, two stride-2 layers, 32-d latent.
TINY = dict(image_size=16, channels=(16, 32), latent_dim=32, epochs=20, batch_size=64,
            calibration_fraction=0.25)


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
