"""The result view never presents a failed search as a finding (issue 19): a non-positive best CEI is shown in a
neutral box that says no hypothesis raised P(true), candidates come selected-first then by CEI, CEI is explained
in words, and each counterfactual shows its distance from the original, whole-image edits flagged."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QFrame, QLabel

from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, SampleInfo
from nemo_desktop.gui.panes.workbench.widgets.result_view import ResultBundle, ResultView

pytestmark = pytest.mark.gui


def result(ceis, selected, distances=(None, None, None), flagged=()):
    top = [ClassScore(1, "eight", 0.9), ClassScore(0, "three", 0.1)]
    cands = [Candidate(f"Hypothesis {j + 1}.", "image", f"Edit {j + 1}", f"edited_{j}", 0.1,
                       0.1 + ceis[j] / 100, ceis[j], edit_distance=distances[j],
                       edit_distance_metric="1-ssim" if distances[j] is not None else None,
                       edit_flagged=j in flagged,
                       edit_verdict_reason="structure test: 0.30, below 0.80 -> destroyed or replaced"
                       if j in flagged else None) for j in range(len(ceis))]
    return ExplanationResult("scitx", SampleInfo("q.png", "abc", 0, "three", 1, "eight", 0.1, 0.9, top),
                             explanation=cands[selected].hypothesis, selected_index=selected,
                             cei=ceis[selected], candidates=cands)


def show(qtbot, r):
    view = ResultView()
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.sig_built, timeout=5000):
        view.show_bundles([ResultBundle("k", None, r)])
    view.resize(600, 3000)
    show.kept = view  # the view owns the column: keep it alive while the test reads it
    return view.columns[0]


def hypothesis_order(column) -> list[str]:
    labels = [lb for lb in column.findChildren(QLabel) if lb.objectName().startswith("hypothesis")]
    return [lb.text() for lb in sorted(labels, key=lambda lb: lb.mapTo(column.widget(), lb.rect().topLeft()).y())]


def test_non_positive_best_cei_is_neutral_not_a_finding(qtbot):
    column = show(qtbot, result([-24.4, -30.0, -2.0], selected=2))
    box = column.findChild(QFrame, "selectedExplanation")
    assert box.property("finding") is False and "#2e7d32" not in box.styleSheet()
    title = column.findChild(QLabel, "explanationTitle").text()
    assert "No hypothesis raised P(true) (best CEI -2.0)" in title and "Explanation" not in title
    assert "percentage points" in column.findChild(QLabel, "ceiExplained").text()
    column.widget().adjustSize()
    assert hypothesis_order(column) == ["Hypothesis 3.", "Hypothesis 1.", "Hypothesis 2."]


def test_positive_cei_is_a_finding_and_distances_and_flags_are_shown(qtbot):
    column = show(qtbot, result([20.0, 94.9, 5.0], selected=0, distances=(0.12, 0.97, 0.2), flagged=(1,)))
    box = column.findChild(QFrame, "selectedExplanation")
    assert box.property("finding") is True and "#2e7d32" in box.styleSheet()
    assert "Explanation</b> (CEI +20.0)" in column.findChild(QLabel, "explanationTitle").text()
    column.widget().adjustSize()
    assert hypothesis_order(column) == ["Hypothesis 1.", "Hypothesis 2.", "Hypothesis 3."]
    flagged = column.findChild(QLabel, "distance1").text()
    assert flagged.startswith("Distance from the original: 1-ssim 0.97, whole image changed (flagged)")
    assert column.findChild(QLabel, "distance0").text() == "Distance from the original: 1-ssim 0.12"
    # issue 45: which test decided each verdict, in words
    assert column.findChild(QLabel, "verdict1").text() == ("Verdict: structure test: 0.30, below 0.80 -> "
                                                            "destroyed or replaced")
    assert column.findChild(QLabel, "verdict0") is None  # no verdict measured: none shown
    header = column.findChild(QFrame, "candidate1")
    assert "whole image changed" in "\n".join(lb.text() for lb in header.findChildren(QLabel))
