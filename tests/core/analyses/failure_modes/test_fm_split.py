"""Step 1 on given vectors: inequality directions for uncertainty vs confidence, neutral band, sigma = 0,
the per-class ranking split, and the entropy estimate for rows indexed before entropies were stored."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.analyses.failure_modes.split import (correctness_split, entropy_from_top5, entropy_split,
                                                             probability_split, ranking_split)


def test_entropy_high_is_hard_probability_low_is_hard():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])  # mean 2, std sqrt(2): thresholds 2 +/- 0.283 at a = 0.2
    e = entropy_split(x, 0.2)
    assert e.hard.tolist() == [3, 4] and e.easy.tolist() == [0, 1] and e.neutral.tolist() == [2]
    assert e.hard_threshold == pytest.approx(2 + 0.2 * np.sqrt(2))
    p = probability_split(x, 0.2)
    assert p.hard.tolist() == [0, 1] and p.easy.tolist() == [3, 4] and p.neutral.tolist() == [2]
    wide = entropy_split(x, 1.0)  # thresholds 2 +/- 1.41: only the extremes
    assert wide.hard.tolist() == [4] and wide.easy.tolist() == [0] and len(wide.neutral) == 3


def test_correctness_split_puts_errors_in_the_hard_set():
    s = correctness_split(np.array([1, 1, 0, 1, 0], bool), 0.2)
    assert s.hard.tolist() == [2, 4] and s.easy.tolist() == [0, 1, 3]


def test_constant_scores_give_an_empty_hard_set_with_a_message():
    s = entropy_split(np.full(4, 0.7), 0.2)
    assert len(s.hard) == 0 and len(s.easy) == 0 and len(s.neutral) == 4
    assert "same entropy" in s.notes[0]


def test_ranking_split_false_negatives_and_false_positives_are_hard():
    labels = np.array([3, 3, 3, 1, 1, 2])
    preds = np.array([3, 8, 3, 3, 1, 2])
    rows, s = ranking_split(labels, preds, 3)
    assert rows.tolist() == [0, 1, 2, 3]  # true 3 or predicted 3
    assert rows[s.easy].tolist() == [0, 2]  # true positives
    assert rows[s.hard].tolist() == [1, 3]  # FN (3 -> 8) and FP (1 -> 3)


def test_entropy_from_top5_is_exact_when_top5_holds_all_mass_and_spreads_the_rest():
    p = [0.5, 0.25, 0.125, 0.0625, 0.0625]
    exact = -sum(q * np.log(q) for q in p)
    assert entropy_from_top5([[i, q] for i, q in enumerate(p)], 10) == pytest.approx(exact)
    # 0.2 left over, spread over 5 other classes as 0.04 each
    top = [[0, 0.4], [1, 0.2], [2, 0.1], [3, 0.05], [4, 0.05]]
    full = [0.4, 0.2, 0.1, 0.05, 0.05] + [0.04] * 5
    assert entropy_from_top5(top, 10) == pytest.approx(-sum(q * np.log(q) for q in full))
