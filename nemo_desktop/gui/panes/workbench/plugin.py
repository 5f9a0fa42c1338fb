"""Explanation workbench pane (placeholder until SciTX exists in the core)."""
from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout

from ...widgets.placeholder import PlaceholderView
from ..base import Pane, PaneHost


class WorkbenchPane(Pane):
    NAME = "workbench"
    TITLE = "Explanation workbench"
    SUMMARY = "Explain why the classifier got a sample wrong, and test the explanation with counterfactuals."

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.placeholder = PlaceholderView(
            self.TITLE, self.SUMMARY,
            ["A method (SciTX and the baselines) and its settings, run on the selected samples with live "
             "stage progress.",
             "The original image, the observations grouped as Sets A/B/C with their captions.",
             "Candidate hypotheses with their CEI; each counterfactual image beside the original with the "
             "true-class probability before and after (or the rewritten prompt for zero-shot classifiers).",
             "The selected explanation highlighted; past results from the store; methods side by side."],
            "Not available in this build yet: the explanation methods are not part of it.")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.placeholder)


PANE = WorkbenchPane
