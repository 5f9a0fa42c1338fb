"""Report exporter pane (placeholder until the report engine exists in the core)."""
from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout

from ...widgets.placeholder import PlaceholderView
from ..base import Pane, PaneHost

NOT_READY = "Not available in this build yet: the report engine is not part of it."


class ReportExporterPane(Pane):
    NAME = "report_exporter"
    TITLE = "Report exporter"
    SUMMARY = "Turn stored explanations into an HTML or PDF report."

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.placeholder = PlaceholderView(
            self.TITLE, self.SUMMARY,
            ["The stored results, to pick from.", "HTML or PDF, and where to save it.",
             "Export in the background, with progress."],
            NOT_READY)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.placeholder)

    def export_report(self) -> None:
        """File ▸ Export report…"""
        self.host.show_message("Export report", NOT_READY)


PANE = ReportExporterPane
