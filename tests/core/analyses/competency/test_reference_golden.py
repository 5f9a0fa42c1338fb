"""Agreement with the reference implementation (sarapohland/competency-counterfactuals at 6fd0ee4).

golden/ holds tiny models (safetensors) and the numbers the reference's own code produced with them once,
at development time (its PARCE statistics, z-score search and competency, and its FGD, LGD, LNN and Reco
outputs on 12 low-competency digits). The reference has no licence, so none of its code is here. NEMO's
compatibility mode (mean shift 2, batch-wide stopping, no clamping, strict success) must match within 1e-5.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from fixtures_tiny.competency_world import DigitsClassifier, DigitsNet, indexed_digits, to_unit

from nemo_desktop.core.analyses.competency import CounterfactualConfig, FittedEstimator
from nemo_desktop.core.analyses.competency.autoencoder import ConvAutoencoder
from nemo_desktop.core.analyses.competency.generators import generate
from nemo_desktop.core.analyses.competency.parce import (class_statistics, competency_np, reconstruction_losses,
                                                         select_z)
from nemo_desktop.core.jobs import null_context

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def reference():
    golden = json.loads((GOLDEN / "golden_reference.json").read_text())
    t = load_file(GOLDEN / "tiny_models.safetensors")
    net = DigitsNet()
    net.load_state_dict({k[11:]: v for k, v in t.items() if k.startswith("classifier.")})
    ae = ConvAutoencoder(16, (16, 32), 32)
    ae.load_state_dict({k[12:]: v for k, v in t.items() if k.startswith("autoencoder.")})
    clf = DigitsClassifier(net)
    images, labels = indexed_digits(golden["calibration_indices"])
    x = to_unit(images)
    with torch.no_grad():
        probs = torch.softmax(net(x), 1).double().numpy()
        losses = reconstruction_losses(ae.eval(), x).double().numpy()
        latents = ae.encode(x)
    stats, _ = class_statistics(losses, labels, 9)
    cal = select_z(probs, losses, labels, stats, 2.0, 4.95, 0.05)
    rho, _ = competency_np(probs, losses, stats, cal.z, 2.0)
    est = FittedEstimator(clf, ae, stats, cal, mean_shift=2.0, input_size=(16, 16), bank_latents=latents,
                          bank_competency=torch.from_numpy(rho), manifest={})
    return golden, est, rho


def test_statistics_calibration_and_scores_match_the_reference(reference):
    golden, est, rho = reference
    assert golden["reference"].endswith("@6fd0ee4")
    np.testing.assert_allclose(est.statistics.mean, golden["class_means"], rtol=1e-5)
    np.testing.assert_allclose(est.statistics.std, golden["class_stds"], rtol=1e-5)
    assert est.calibration.z == pytest.approx(golden["zscore"], abs=1e-9)
    assert est.calibration.accuracy == pytest.approx(golden["accuracy"])
    np.testing.assert_allclose(rho, golden["calibration_competency"], atol=1e-5)
    assert int((est.bank_competency > 0.9).sum()) == golden["lnn_bank_size"]


@pytest.mark.parametrize("method", ["reco", "fgd", "lgd", "lnn"])
def test_compatibility_mode_reproduces_the_reference_generators(reference, method):
    golden, est, _ = reference
    x = to_unit(indexed_digits(golden["low_indices"])[0])
    with torch.no_grad():
        np.testing.assert_allclose(est.competency(x)["competency"].numpy(), golden["low_competency"], atol=1e-5)
    out = generate(method, est, x, CounterfactualConfig(compatibility=True), null_context()).images
    want = golden["generators"][method]
    with torch.no_grad():
        np.testing.assert_allclose(est.competency(out)["competency"].numpy(), want["competency"], atol=1e-5)
    np.testing.assert_allclose(out.double().mean(dim=(1, 2, 3)).numpy(), want["pixel_mean"], atol=1e-5)
    assert float(out.min()) == pytest.approx(want["pixel_min"], abs=1e-5)
    assert float(out.max()) == pytest.approx(want["pixel_max"], abs=1e-5)
