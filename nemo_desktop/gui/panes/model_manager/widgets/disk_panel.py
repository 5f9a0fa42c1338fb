"""Disk usage of the weights cache: every repository with its size, plus the total and the free space."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QPushButton, QTableWidgetItem, QVBoxLayout, QWidget

from ....jobs import IO
from ....widgets.list_table import list_table
from ..catalog_rows import DiskReport, disk_report


def _size(n: int) -> str:
    from nemo_desktop.core.models.catalog import format_size

    return format_size(n)


class DiskPanel(QGroupBox):
    def __init__(self, host, parent: QWidget | None = None):
        super().__init__("Disk usage", parent)
        self.host = host
        self.summary = QLabel("")
        self.summary.setObjectName("diskSummary")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)  # error messages, paths
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = list_table(["Repository", "Size", "Catalog ids"], "diskTable")
        self.table.setMaximumHeight(150)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.refresh_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.table)
        self._job = None

    def refresh(self):
        if self._job is not None and self._job.active:
            return self._job
        self.summary.setText("Measuring the weights cache…")
        self._job = self.host.jobs.submit(disk_report, title="Measuring the weights cache", lane=IO,
                                          ask_before_quit=False, visible=False)
        self._job.sig_done.connect(self._show)
        self._job.sig_failed.connect(lambda e: self.summary.setText(f"Could not measure: {e.get('message')}"))
        return self._job

    def _show(self, report: DiskReport) -> None:
        total = sum(r.size_on_disk for r in report.repos)
        free = f"; {_size(report.free_bytes)} free on that disk" if report.free_bytes is not None else ""
        self.summary.setText(f"{_size(total)} in {len(report.repos)} repositories in {report.cache_dir}{free}.")
        self.table.setRowCount(len(report.repos))
        for i, r in enumerate(report.repos):
            size = QTableWidgetItem(_size(r.size_on_disk))
            size.setTextAlignment(int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter))
            for col, item in enumerate((QTableWidgetItem(r.repo_id), size,
                                        QTableWidgetItem(", ".join(report.catalog_ids.get(r.repo_id, [])) or "—"))):
                self.table.setItem(i, col, item)
