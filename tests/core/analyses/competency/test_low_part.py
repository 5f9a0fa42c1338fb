"""Which part of competency is low, at the set's own threshold, counted one way in every output: per-image lines,
the summary, the report. An image whose confidence and P(ID) are both at or above the threshold but whose product
is below it has its own label ("product")."""
from __future__ import annotations

import pytest

from nemo_desktop.core.analyses.competency.results import CompetencyScore, low_part
from nemo_desktop.core.analyses.competency.score_set import CompetencyScoreSet, ScoredImage


def _score(conf, pid):
    return CompetencyScore(competency=conf * pid, confidence=conf, id_probability=pid, reconstruction_loss=0.01,
                           loss_z_score=0.5, pred_index=0, pred_name="zero")


@pytest.mark.parametrize("conf, pid, threshold, part", [
    (0.95, 0.95, 0.9, "competent"),
    (0.93, 0.92, 0.9, "product"),  # 0.856 < 0.9 with both parts >= 0.9
    (0.80, 0.99, 0.9, "unsure"),
    (0.99, 0.50, 0.9, "unfamiliar"),
    (0.50, 0.50, 0.9, "both"),
    (0.80, 0.70, 0.5, "competent"),  # 0.56 >= 0.5: at 0.9 this would be "both"
    (0.60, 0.70, 0.5, "product"),  # 0.42 < 0.5
])
def test_low_part(conf, pid, threshold, part):
    assert low_part(_score(conf, pid), threshold) == part
    assert low_part(_score(conf, pid).to_dict(), threshold) == part


def _set(threshold=0.5):
    items = [ScoredImage(f"/d/{i}.png", _score(c, p)) for i, (c, p) in
             enumerate([(0.8, 0.7), (0.6, 0.7), (0.4, 0.9), (0.9, 0.3), (0.3, 0.3), (0.99, 0.99)])]
    return CompetencyScoreSet(items, threshold)


def test_the_summary_counts_each_low_image_by_its_part():
    sm = _set().summary()
    assert (sm["n_low"], sm["n_unsure"], sm["n_unfamiliar"], sm["n_both"], sm["n_product"]) == (4, 2, 2, 1, 1)
    assert sm["n_low"] == sm["n_unsure"] + sm["n_unfamiliar"] - sm["n_both"] + sm["n_product"]


def test_per_image_lines_use_the_sets_threshold_and_agree_with_the_summary():
    from nemo_desktop.cli.commands.competency import format_score_set

    text = format_score_set(_set(0.5))
    lines = {ln.split(":")[0]: ln for ln in text.splitlines() if ln.startswith("/d/")}
    assert lines["/d/0.png"].endswith("; competent")  # 0.8 x 0.7 = 0.56 >= 0.5 (labelled at 0.9 before)
    assert lines["/d/1.png"].endswith("; neither part is below the threshold, but their product is")
    assert lines["/d/2.png"].endswith("; the classifier is unsure")
    assert lines["/d/4.png"].endswith("; the classifier is unsure and the image is unfamiliar")
    assert "4 of 6 images below competency 0.5" in text and "neither part alone (only the product) 1" in text


def test_the_report_counts_and_labels_the_same_way():
    from nemo_desktop.core.reports import render_html
    from nemo_desktop.core.reports.sections import build_result_report
    from nemo_desktop.core.reports.sections.competency import diagnosis

    html = render_html(build_result_report(_set(0.5), None))
    assert "of which neither part alone (only their product is below)" in html
    assert "1 of 4" in html
    assert diagnosis(_score(0.6, 0.7), 0.5).endswith(
        "neither part is below 0.5 (confidence 0.600, P(in-distribution) 0.700), but their product is.")
    assert diagnosis(_score(0.8, 0.7), 0.5).startswith("The classifier is competent on this image")
