"""The PaRCE formula against independent oracles (scipy, brute force), numpy vs torch, calibration edge cases."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from nemo_desktop.core.analyses.competency.parce import (class_statistics, competency_np, competency_torch,
                                                         select_z)


def _random_case(seed=0, n=40, c=4):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, c)) * 3
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = rng.integers(0, c, n)
    losses = rng.gamma(2.0, 0.01, n)
    return probs, losses, labels


def _oracle(probs, losses, mu, sd, z, s):
    out = []
    for p, L in zip(probs, losses):
        pid = sum(p[c] * norm.sf((L - s * mu[c]) / sd[c] - z) for c in range(len(p)))
        out.append(max(p) * pid)
    return np.array(out)


@pytest.mark.parametrize("shift", [1.0, 2.0])
@pytest.mark.parametrize("z", [0.0, 1.3])
def test_competency_equals_scipy_oracle(shift, z):
    probs, losses, labels = _random_case()
    stats, notes = class_statistics(losses, labels, 4)
    assert notes == []
    mu = [losses[labels == c].mean() for c in range(4)]
    sd = [losses[labels == c].std() for c in range(4)]  # population std, as the reference
    np.testing.assert_allclose(stats.mean, mu)
    np.testing.assert_allclose(stats.std, sd)
    rho, _ = competency_np(probs, losses, stats, z, shift)
    np.testing.assert_allclose(rho, _oracle(probs, losses, mu, sd, z, shift), rtol=1e-12)


def test_numpy_and_torch_agree_and_torch_is_differentiable():
    probs, losses, labels = _random_case(1)
    stats, _ = class_statistics(losses, labels, 4)
    rho_np, pid_np = competency_np(probs, losses, stats, 0.7, 2.0)
    p = torch.tensor(probs, requires_grad=True)
    L = torch.tensor(losses, requires_grad=True)
    rho_t, pid_t = competency_torch(p, L, stats, 0.7, 2.0)
    np.testing.assert_allclose(rho_t.detach().numpy(), rho_np, atol=1e-6)
    np.testing.assert_allclose(pid_t.detach().numpy(), pid_np, atol=1e-6)
    rho_t.sum().backward()
    assert torch.isfinite(L.grad).all() and (L.grad < 0).all()  # a larger loss always lowers competency
    assert p.grad.abs().sum() > 0


def test_monotone_in_z_and_in_loss():
    probs, losses, labels = _random_case(2)
    stats, _ = class_statistics(losses, labels, 4)
    by_z = [competency_np(probs, losses, stats, z, 2.0)[0] for z in (0, 0.5, 1, 2)]
    assert all((a <= b + 1e-15).all() for a, b in zip(by_z, by_z[1:]))
    p1 = np.repeat(probs[:1], 5, 0)
    by_L = competency_np(p1, np.linspace(0.001, 0.2, 5), stats, 0.5, 2.0)[0]
    assert (np.diff(by_L) <= 0).all()


def test_select_z_is_the_brute_force_argmin():
    probs, losses, labels = _random_case(3, n=200)
    probs[np.arange(120), labels[:120]] += 5  # make most predictions right, so the target is reachable
    probs /= probs.sum(1, keepdims=True)
    stats, _ = class_statistics(losses, labels, 4)
    cal = select_z(probs, losses, labels, stats, 2.0, 4.95, 0.05)
    acc = (probs.argmax(1) == labels).mean()
    grid = [round(0.05 * i, 10) for i in range(100)]
    gaps = [abs(competency_np(probs, losses, stats, z, 2.0)[0].mean() - acc) for z in grid]
    assert cal.z == grid[int(np.argmin(gaps))]
    assert cal.accuracy == pytest.approx(acc)
    assert len(cal.curve) == 100 and cal.curve[grid.index(cal.z)] == pytest.approx(cal.mean_competency)
    assert not cal.at_bound


def test_select_z_flags_the_end_of_its_range():
    probs, losses, labels = _random_case(4)
    probs = np.zeros_like(probs)
    probs[np.arange(len(labels)), labels] = 1.0  # accuracy 1: no finite z reaches it
    stats, _ = class_statistics(losses, labels, 4)
    with pytest.warns(RuntimeWarning, match="end of its search range"):
        cal = select_z(probs, losses, labels, stats, 2.0, 1.0, 0.25)
    assert cal.at_bound and cal.z == 1.0 and cal.mean_competency < 1.0


def test_pooled_statistics_for_tiny_or_flat_classes():
    losses = np.array([0.1, 0.2, 0.3, 0.05, 0.05, 0.4])
    labels = np.array([0, 0, 0, 1, 1, 2])  # class 1 has zero spread, class 2 one image, class 3 none
    stats, notes = class_statistics(losses, labels, 4)
    assert stats.pooled == (False, True, True, True)
    assert stats.mean[1] == pytest.approx(losses.mean()) and stats.std[2] == pytest.approx(losses.std())
    assert len(notes) == 3 and "class 1" in notes[0]
    rho, _ = competency_np(np.full((2, 4), 0.25), np.array([0.1, 0.5]), stats, 0.0, 2.0)
    assert np.isfinite(rho).all()
    assert math.isclose(stats.to_dict()["pooled_std"], losses.std())
