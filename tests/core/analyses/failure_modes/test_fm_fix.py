"""Issue 29 from a failure mode: a stored failure-modes result's mode (key + position) is a fix's finding. Its
images, with their true labels from the reference index, join the training data; those that are also held-out
images are left out and counted; the fix page's settings come from its confusions. On the digits ink world: a
real CNN with a colour shortcut, its real failure-modes result over its real reference index."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from digits_world import CLASS_NAMES, render, training_ink
from fm_digits_world import sentence_file
from nemo_desktop.core.analyses.failure_modes import FailureModesConfig, FailureModesPipeline
from nemo_desktop.core.analyses.failure_modes.members import list_modes, mode_members
from nemo_desktop.core.analyses.fix import FixData
from nemo_desktop.core.analyses.fix.from_mode import fix_settings_for_mode, fix_settings_for_ref
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.images import load_image
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.registry import Components, build_analysis

FAST = {"mode": "head", "epochs": 1, "bootstrap": 100, "save": False, "per_class": 5}


@pytest.fixture
def analysed(ink_world, tmp_path):
    clf, index, embedder, store = ink_world
    cfg = FailureModesConfig(clusters=4, tau=None, split="correctness",
                             sentence_sets=(str(sentence_file(tmp_path / "s.json")),))
    return clf, FailureModesPipeline(clf, embedder, store, cfg)(index), index, store


def _most_errors(result, index) -> int:
    """The 1-based position of the mode with the most misclassified images."""
    modes = list_modes(result)
    wrong = [sum(not m.correct for m in mode_members(mode, index)[0]) for mode in modes]
    return int(np.argmax(wrong)) + 1


def _data(digits, index, held_out_rows) -> FixData:
    """Training digits in their training inks; held out: some of the index's own images (so that some of the
    mode's images are held-out images), the affected ones being the misclassified."""
    rng = np.random.default_rng(0)
    (x_train, y_train) = digits[2]
    train = [(render(x, training_ink(int(y), rng)), int(y)) for x, y in zip(x_train[:200], y_train[:200])]
    e = index.entries
    held = [(load_image(str(e.paths[r])), int(e.labels[r]), bool(e.correct[r])) for r in held_out_rows]
    return FixData(list(CLASS_NAMES), train, [(im, y) for im, y, ok in held if not ok],
                   [(im, y) for im, y, ok in held if ok])


def test_the_fix_page_settings_come_from_the_modes_confusions(analysed):
    _, result, index, store = analysed
    pos = _most_errors(result, index)
    mode = list_modes(result)[pos - 1]
    out = fix_settings_for_mode(store, result.result_key, pos)
    s = out["settings"]
    assert (s["data"], s["failure_modes"], s["failure_mode"], s["instruction"]) == ("edit", result.result_key, pos, "")
    wrong = [m for m in mode_members(mode, index)[0] if not m.correct]
    top = Counter((m.true_name, m.pred_name) for m in wrong).most_common(1)[0][0]
    affected, predicted = s["affected_classes"].split(","), s["predicted_classes"].split(",")
    assert (affected[0], predicted[0]) == top  # the most frequent confusion first
    assert set(affected) <= {m.true_name for m in wrong} and set(predicted) <= {m.pred_name for m in wrong}
    assert (out["sentence"], out["title"], out["images"]) == (mode.sentence, mode.title, len(mode.paths))
    assert fix_settings_for_ref(store, mode) == out  # the app's pickers hold ModeRefs
    with pytest.raises(ConfigError, match="no mode"):
        fix_settings_for_mode(store, result.result_key, len(list_modes(result)) + 1)
    with pytest.raises(ConfigError, match="No stored failure-modes result"):
        fix_settings_for_mode(store, "0" * 64, 1)


def test_a_fix_from_a_mode_trains_on_its_images_with_their_true_labels(analysed, digits):
    clf, result, index, store = analysed
    pos = _most_errors(result, index)
    mode = list_modes(result)[pos - 1]
    members, _ = mode_members(mode, index)
    row_of = {str(p): r for r, p in enumerate(index.entries.paths)}
    mode_rows = [row_of[m.path] for m in members]
    # Held out: a third of the mode's images and 60 other images of the index.
    others = [r for r in range(len(index)) if r not in set(mode_rows)][:60]
    held_rows = mode_rows[::3] + others
    data = _data(digits, index, held_rows)
    settings = fix_settings_for_mode(store, result.result_key, pos)["settings"]
    fix = build_analysis("fix", Components(classifier=clf, store=store), {**settings, **FAST})
    result_fix = fix(data, JobContext())

    fm = result_fix.data["description"]["failure_mode"]
    trained = [m for m in members if row_of[m.path] not in set(held_rows)]
    assert (fm["images"], fm["held_out_excluded"], fm["missing"]) == (len(trained), len(mode_rows[::3]), 0)
    assert (fm["result"], fm["position"], fm["sentence"]) == (result.result_key, pos, mode.sentence)
    assert result_fix.data["targeted"] == len(trained)
    by_class = {s["class"]: s["count"] for s in result_fix.sources if s["source"] == "finding-images"}
    assert by_class == dict(Counter(m.true_name for m in trained))  # true labels, not the predictions
    assert result_fix.affected["overall"]["n"] + result_fix.rest["overall"]["n"] == len(held_rows)

    # Keyed: another mode is another result; named by half (key without position) it is refused.
    if len(list_modes(result)) > 1:
        other = 1 if pos != 1 else 2
        again = build_analysis("fix", Components(classifier=clf, store=store),
                               {**settings, **FAST, "failure_mode": other})(data, JobContext())
        assert again.key != result_fix.key
    with pytest.raises(ConfigError, match="missing"):
        build_analysis("fix", Components(classifier=clf, store=store),
                       {**FAST, "failure_mode": pos})(data, JobContext())


def test_a_mode_whose_images_are_all_held_out_is_refused(analysed, digits):
    clf, result, index, store = analysed
    mode = list_modes(result)[0]
    row_of = {str(p): r for r, p in enumerate(index.entries.paths)}
    rows = [row_of[p] for p in mode.paths]
    data = _data(digits, index, rows + [r for r in range(len(index)) if r not in set(rows)][:30])
    with pytest.raises(ConfigError, match="held-out images"):
        build_analysis("fix", Components(classifier=clf, store=store),
                       {**FAST, "failure_modes": result.result_key, "failure_mode": 1})(data, JobContext())
