import math

import numpy as np
import pytest

from nemo_desktop.core.base.records import Candidate
from nemo_desktop.core.metrics.cei import best_candidate, cei, rank_of, top_k


def test_cei_is_percentage_points_of_true_class_gain():
    assert cei(0.75, 0.25) == pytest.approx(50.0)
    assert cei(0.1, 0.3) == pytest.approx(-20.0)
    assert cei(0.4, 0.4) == 0.0


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_cei_rejects_non_probabilities(bad):
    with pytest.raises(ValueError):
        cei(bad, 0.5)
    with pytest.raises(ValueError):
        cei(0.5, bad)


def test_top_k_orders_by_probability_and_breaks_ties_by_index():
    names = ["a", "b", "c", "d"]
    out = top_k(np.array([0.1, 0.4, 0.1, 0.4], dtype=np.float32), names, k=3)
    assert [(s.index, s.name) for s in out] == [(1, "b"), (3, "d"), (0, "a")]
    assert out[0].prob == pytest.approx(0.4)
    assert len(top_k([0.5, 0.5], ["x", "y"], k=5)) == 2
    with pytest.raises(ValueError):
        top_k([0.5, 0.5], ["x"], k=1)


def test_rank_of():
    assert rank_of([0.1, 0.6, 0.3], 1) == 1
    assert rank_of([0.1, 0.6, 0.3], 0) == 3


def test_best_candidate_skips_errors_and_unscored():
    cands = [Candidate("h0", cei=5.0), Candidate("h1", cei=30.0, error="editor failed"),
             Candidate("h2", cei=None), Candidate("h3", cei=12.0), Candidate("h4", cei=12.0)]
    assert best_candidate(cands) == 3
    assert best_candidate([Candidate("x", cei=-3.0)]) == 0
    assert best_candidate([Candidate("x", error="bad")]) is None
    assert best_candidate([]) is None
