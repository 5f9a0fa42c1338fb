"""Which images belong to a failure mode (the Qt-free half of "show it in the browser / send it to the workbench"),
on the digits ink world: a real CNN's failure-modes result over its real reference index."""
from __future__ import annotations

import numpy as np
import pytest

from fm_digits_world import sentence_file
from nemo_desktop.core.analyses.failure_modes import FailureModesConfig, FailureModesPipeline
from nemo_desktop.core.analyses.failure_modes.describe import describe
from nemo_desktop.core.analyses.failure_modes.members import list_modes, member_mask, mode_members
from nemo_desktop.core.analyses.failure_modes.validate import cluster_errors
from nemo_desktop.core.base.errors import ConfigError


@pytest.fixture
def analysed(ink_world, tmp_path):
    clf, index, embedder, store = ink_world
    cfg = FailureModesConfig(clusters=4, tau=None, split="correctness",
                             sentence_sets=(str(sentence_file(tmp_path / "s.json")),))
    return FailureModesPipeline(clf, embedder, store, cfg)(index), index


def test_modes_are_numbered_and_worded_as_the_report_words_them(analysed):
    result, index = analysed
    modes = list_modes(result)
    clusters = [c for g in result.groups for c in g.hard_clusters]
    assert len(modes) == len(clusters) > 0
    assert [m.sentence for m in modes] == [t.sentence for t in describe(result)]
    assert [m.number for m in modes] == list(range(1, len(modes) + 1))  # one group: the whole dataset
    for m, c in zip(modes, clusters):
        assert m.paths == tuple(c.paths) and len(m.paths) == c.size
        assert m.index_id == index.index_id and m.result_key == result.result_key
        assert m.title.startswith(("Failure mode", "Hard cluster")) and result.result_key[:12] in m.title


def test_members_are_the_cluster_images_with_what_the_classifier_said(analysed):
    result, index = analysed
    mode = list_modes(result)[0]
    cluster = result.groups[0].hard_clusters[0]
    members, missing = mode_members(mode, index)
    assert missing == 0 and [m.path for m in members] == list(cluster.paths)
    e, names = index.entries, index.class_names
    for m, r in zip(members, cluster.rows):
        assert (m.true_name, m.pred_name, m.correct) == (names[e.labels[r]], names[e.preds[r]], bool(e.correct[r]))
        assert m.confidence == pytest.approx(float(e.prob_pred[r]))
    errors = [m.path for m in members if not m.correct]
    assert errors == [str(e.paths[r]) for r in cluster_errors(index, cluster)]  # the rows validate.py tests on
    assert len(errors) == round(cluster.size * (1 - cluster.accuracy))  # the correctness split: hard = wrong


def test_paths_the_index_no_longer_holds_are_counted_not_guessed(analysed):
    result, index = analysed
    mode = list_modes(result)[0]
    gone = mode.paths[0]
    keep = np.array([str(p) != gone for p in index.entries.paths])
    for name in ("paths", "sha256", "labels", "preds", "prob_label", "prob_pred", "correct", "entropy"):
        setattr(index.entries, name, getattr(index.entries, name)[keep])
    members, missing = mode_members(mode, index)
    assert missing == 1 and gone not in [m.path for m in members] and len(members) == len(mode.paths) - 1


def test_another_index_is_refused_and_the_mask_marks_the_members(analysed):
    result, index = analysed
    mode = list_modes(result)[0]
    index.index_id = "someone-else"
    with pytest.raises(ConfigError, match="comes from index"):
        mode_members(mode, index)
    paths = np.array([*mode.paths[:2], "/elsewhere/x.png"], dtype=object)
    assert member_mask(paths, mode).tolist() == [True, True, False]
