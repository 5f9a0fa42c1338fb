"""Sentence selection on fixed similarity vectors (the implementation note's worked example)."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.analyses.failure_modes.ranking import auto_tau, rank, similarities

S = ["obj", "night", "fog", "beach", "snow"]
V_H = np.array([.30, .22, .18, .10, .12])
V_E = np.array([.31, .12, .17, .11, -.05])


def names(method, k, tau=0.15, v_h=V_H, v_e=V_E):
    r = rank(method, v_h, v_e, k, tau)
    return [S[i] for i in r.indices], r.tau_fallback


@pytest.mark.parametrize("method,k1,k2", [
    ("tops", ["obj"], ["obj", "night"]),
    ("pdiff", ["snow"], ["snow", "night"]),  # d = .17 for snow although its v_h is low
    ("setdiff", ["night"], ["night", "snow"]),  # S_e = {obj, fog} removed
    ("fpdiff", ["night"], ["night", "fog"]),  # snow fails tau on v_h
])
def test_worked_example(method, k1, k2):
    assert names(method, 1) == (k1, False)
    assert names(method, 2) == (k2, False)


def test_tau_above_every_similarity_pads_by_v_h_and_flags_it():
    assert names("fpdiff", 2, tau=0.5) == (["obj", "night"], True)
    # SetDiff with tau below every v_e: every sentence is in S_e, nothing is left
    assert names("setdiff", 3, tau=-1.0) == (["obj", "night", "fog"], True)
    # fewer qualifying sentences than K: the qualifying ones first, then the fill
    assert names("fpdiff", 3, tau=0.2) == (["night", "obj", "fog"], True)


def test_ties_keep_sentence_order():
    flat = np.zeros(5)
    for m in ("tops", "pdiff", "setdiff", "fpdiff"):
        assert rank(m, flat, flat, 3, -0.5).indices == [0, 1, 2]


def test_without_easy_cluster_pdiff_equals_tops():
    assert rank("pdiff", V_H, None, 3, .15).indices == rank("tops", V_H, None, 3, .15).indices


def test_similarities_are_cosines_and_auto_tau_is_mean_plus_std():
    protos = np.array([[2.0, 0.0], [1.0, 1.0]])
    sent = np.array([[1.0, 0.0], [0.0, 3.0]])
    s = similarities(protos, sent)
    assert np.allclose(s, [[1, 0], [2 ** -.5, 2 ** -.5]], atol=1e-6)
    assert auto_tau(s) == pytest.approx(float(s.mean() + s.std()), rel=1e-6)


def test_images_by_sentence_orders_rows_and_skips_missing_embeddings():
    from nemo_desktop.core.analyses.failure_modes.ranking import images_by_sentence

    feats = np.array([[1.0, 0.0], [0.0, 1.0], [np.nan, np.nan], [0.6, 0.8], [0.8, 0.6]], np.float32)
    rows, sims = images_by_sentence(feats, np.array([1.0, 0.0]))
    assert rows.tolist() == [0, 4, 3, 1] and sims[0] == pytest.approx(1.0)
    rows, _ = images_by_sentence(feats, np.array([0.0, 2.0]), rows=np.array([0, 2, 3]), top=1)
    assert rows.tolist() == [3]
