"""The app shows which test decided an edit's verdict also when the MLLM's semantic check did (issue 45;
methods/edit_semantic.py), with the MLLM's reason as plain text, never as markup."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, SampleInfo
from nemo_desktop.core.methods.edit_semantic import SemanticReading, with_semantic
from nemo_desktop.gui.panes.workbench.widgets.result_view import ResultBundle, ResultView

pytestmark = pytest.mark.gui


def test_the_semantic_verdict_is_shown_in_words_and_its_reason_as_plain_text(qtbot):
    reading = SemanticReading(ran=True, valid=False, verdict="true-class-painted-in", cue_changed=False,
                              same_scene=True, reason="<b>A red three</b> was drawn over the digit.")
    vetoed = Candidate("Thin strokes.", "image", "Make the strokes thicker", None, 0.1, 0.99, 89.0,
                       edit_distance=0.2, edit_distance_metric="1-ssim", edit_structure=0.95, edit_verdict="local",
                       edit_semantic=reading.as_dict(),
                       edit_verdict_reason=with_semantic("structure test: 0.95, at least 0.80 -> kept", reading))
    chosen = Candidate("Blue ink.", "image", "Recolour the digit red", None, 0.1, 0.98, 88.0, edit_distance=0.02,
                       edit_distance_metric="1-ssim", edit_structure=1.0, edit_verdict="local",
                       edit_verdict_reason="structure test: 1.00, at least 0.80 -> kept")
    top = [ClassScore(1, "eight", 0.9), ClassScore(0, "three", 0.1)]
    r = ExplanationResult("scitx", SampleInfo("q.png", "abc", 0, "three", 1, "eight", 0.1, 0.9, top),
                          explanation="Blue ink.", selected_index=1, cei=88.0, candidates=[vetoed, chosen])
    view = ResultView()
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.sig_built, timeout=5000):
        view.show_bundles([ResultBundle("k", None, r)])
    label = view.columns[0].findChild(QLabel, "verdict0")
    text = label.text().replace("\u200b", "")  # long words get break opportunities
    assert text.startswith('Verdict: semantic check by the MLLM: the true class was painted or pasted in ("<b>A red '
                           'three</b> was drawn over the digit.") -> does not test the hypothesis, overruling the '
                           "structure test")
    assert label.textFormat() == Qt.TextFormat.PlainText
