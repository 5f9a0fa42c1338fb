"""LBEE metrics on the implementation note's hand-computed case, and P@K on a hand-built partition."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.analyses.failure_modes.metrics import (hard_sentences, lbee_scores, partition_precision,
                                                              precision_at_k)

# images x1..x6 -> rows 0..5; sentences night, day, street, fog
OMEGA = np.array([1, 1, 1, 0, 0, 1], float)
REL = np.zeros((6, 4), bool)
REL[[3, 4], 0] = True  # night = {x4, x5}
REL[[0, 1, 2, 5], 1] = True  # day
REL[[0, 3], 2] = True  # street = {x1, x4}
REL[5, 3] = True  # fog = {x6}


def test_ground_truth_hand_case():
    gt = hard_sentences(OMEGA, REL, 0.2)
    assert gt.omega_avg == pytest.approx(2 / 3) and gt.omega_std == pytest.approx(0.4714, abs=1e-4)
    assert gt.beta == pytest.approx(0.0943, abs=1e-4)
    assert gt.sentence_omega == [0.0, 1.0, 0.5, 1.0]
    assert gt.hard_sentences == [0, 2]  # S* = {night, street}


def test_scores_hand_case():
    s = lbee_scores([[0, 2], [1, 3]], [np.array([3, 4]), np.array([2])], REL, [0, 2])
    assert s.hr == [1.0, 0.0] and s.ahr == pytest.approx(0.5)
    assert s.cr == [pytest.approx(0.75), pytest.approx(0.5)] and s.acr == pytest.approx(0.625)
    assert s.tpr == pytest.approx(1.0) and s.ji == pytest.approx(0.5)
    assert s.retrieved == [0, 1, 2, 3] and s.true_positives == [0, 2]


def test_undefined_ratios_are_none_not_zero():
    rel = np.zeros((3, 2), bool)  # nothing relevant: no sentence can be in S*
    gt = hard_sentences(np.array([1.0, 0.0, 1.0]), rel, 0.2)
    assert gt.hard_sentences == [] and gt.sentence_omega == [None, None]
    s = lbee_scores([[0]], [np.array([1])], rel, gt.hard_sentences)
    assert s.tpr is None and s.ji == 0.0 and s.ahr == 0.0
    empty = lbee_scores([], [], rel, [])
    assert empty.ahr is None and empty.acr is None and empty.tpr is None and empty.ji is None


def test_beta_moves_the_cut():
    # street (0.5) falls out of S* once beta exceeds 2/3 - 1/2
    gt = hard_sentences(OMEGA, REL, 0.4)  # beta = 0.189 -> cut 0.478
    assert gt.hard_sentences == [0]


def test_precision_at_k_hand_case():
    groups = [np.array([0, 1, 2]), np.array([5, 6])]
    ranked = [np.array([0, 1, 9, 2]), np.array([6, 8, 7]), np.array([5, 2, 1])]
    # group 0: best top-2 overlap is partition 0 ({0,1}) -> 2; group 1: partitions 1 ({6}) or 2 ({5}) -> 1
    assert precision_at_k(groups, ranked, 2) == pytest.approx((2 / 2 + 1 / 2) / 2)


def test_partition_precision_of_clusters_against_the_hard_sentences_images():
    x = np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1]], float)
    protos = [np.array([1.0, 0.0]), np.array([0.0, 1.0])]
    rel = np.zeros((4, 3), bool)
    rel[[0, 1], 0] = True  # sentence 0 holds for the images near prototype 0
    rel[2, 1] = True  # sentence 1 for one image near prototype 1
    rel[3, 2] = True  # sentence 2 is not in S*: not a ground-truth group
    out = partition_precision(x, protos, rel, [0, 1], k=2)
    # group {0,1}: top-2 of prototype 0 = {0,1} -> 2/2; group {2}: top-2 of prototype 1 = {2,3} -> 1/2
    assert out == {"k": 2, "groups": 2, "partitions": 2, "value": pytest.approx(0.75)}
    assert partition_precision(x, protos, rel, [], k=2)["value"] is None  # empty S*: undefined, not 0
    assert partition_precision(x, [], rel, [0], k=2)["value"] is None
