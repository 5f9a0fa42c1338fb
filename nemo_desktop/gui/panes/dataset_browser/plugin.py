"""Dataset browser pane (placeholder until the dataset indexer exists in the core)."""
from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout

from ...widgets.placeholder import PlaceholderView
from ..base import Pane, PaneHost

NOT_READY = "Not available in this build yet: the dataset indexer is not part of it."


class DatasetBrowserPane(Pane):
    NAME = "dataset_browser"
    TITLE = "Dataset browser"
    SUMMARY = "Open a folder of images or a CSV manifest and see where the classifier goes wrong."

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.placeholder = PlaceholderView(
            self.TITLE, self.SUMMARY,
            ["Indexing of the dataset in the background, with progress.",
             "A thumbnail grid that stays fluid with 100,000 images (thumbnails made off the GUI thread "
             "and cached on disk).",
             "Filters: correct / misclassified, true class, predicted class, confidence; per-class accuracy.",
             "Selected samples go to the Explanation workbench."],
            NOT_READY)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.placeholder)

    def open_dataset(self) -> None:
        """File ▸ Open dataset…"""
        self.host.show_message("Open dataset", NOT_READY)


PANE = DatasetBrowserPane
