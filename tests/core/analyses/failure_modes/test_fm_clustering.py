"""Step 2 geometry: Ward against scikit-learn, separated blobs, n < C, determinism, the subsample path,
prototypes and the nearest easy prototype."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.analyses.failure_modes.clustering import (agglomerative, nearest_easy, nearest_members,
                                                                  unit_rows)


def _blobs(rng, n_per=30, d=8):
    centres = np.eye(d)[:3] * 5 + 1
    x = np.concatenate([c + 0.2 * rng.standard_normal((n_per, d)) for c in centres])
    return x, np.repeat(np.arange(3), n_per)


def _same_partition(a, b):
    return all(len(set(b[a == k])) == 1 for k in set(a)) and len(set(a)) == len(set(b))


def test_three_blobs_are_recovered_with_prototypes_as_means():
    x, truth = _blobs(np.random.default_rng(0))
    cl = agglomerative(x, 3)
    assert cl.k == 3 and _same_partition(cl.labels, truth)
    u = unit_rows(x)
    for k in range(3):
        assert np.allclose(cl.prototypes[k], u[cl.labels == k].mean(0), atol=1e-6)
    assert cl.labels[0] == 0  # ids follow the first point of each cluster


def test_ward_equals_scikit_learn_on_a_random_case():
    from sklearn.cluster import AgglomerativeClustering

    x = np.random.default_rng(3).standard_normal((120, 16))
    ours = agglomerative(x, 7).labels
    theirs = AgglomerativeClustering(n_clusters=7, linkage="ward").fit_predict(unit_rows(x))
    assert _same_partition(ours, theirs)


def test_fewer_points_than_clusters_gives_singletons_and_empty_input_works():
    cl = agglomerative(np.random.default_rng(0).standard_normal((3, 4)), 15)
    assert cl.labels.tolist() == [0, 1, 2] and cl.k == 3
    assert agglomerative(np.zeros((0, 4)), 5).k == 0


def test_deterministic():
    x = np.random.default_rng(5).standard_normal((200, 8))
    assert np.array_equal(agglomerative(x, 5).labels, agglomerative(x, 5).labels)


def test_subsample_path_assigns_every_point_and_is_recorded():
    x, truth = _blobs(np.random.default_rng(1), n_per=200)
    cl = agglomerative(x, 3, max_points=60, seed=2)
    assert cl.subsampled == 60 and len(cl.labels) == 600 and set(cl.labels.tolist()) == {0, 1, 2}
    assert _same_partition(cl.labels, truth)  # well-separated blobs: the nearest prototype is the right one
    assert agglomerative(x, 3).subsampled is None


def test_nearest_easy_by_cosine_and_nearest_members():
    hard = np.array([[1.0, 0.1], [0.0, 1.0]])
    easy = np.array([[0.0, 2.0], [3.0, 0.0], [1.0, 1.0]])
    pair, sim = nearest_easy(hard, easy)
    assert pair.tolist() == [1, 0] and sim[1] == pytest.approx(1.0)
    assert nearest_easy(hard, np.zeros((0, 2)))[0].tolist() == [-1, -1]
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.2], [0.7, 0.7]])
    assert nearest_members(x, np.array([0, 1, 2, 3]), np.array([1.0, 0.0]), 2).tolist() == [0, 2]
