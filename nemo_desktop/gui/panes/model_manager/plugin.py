"""Model manager pane: the model catalog with where each model's weights stand.

The catalog and the cache status are read on the I/O lane when the pane is first shown (the cache may be
large or on a network drive). Download, delete, load/unload, custom checkpoints and credentials come next;
until then the pane says so and points to the CLI that already does downloads.
"""
from __future__ import annotations

from PySide6.QtCore import QSettings, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableView,
                               QVBoxLayout)

from ...jobs import IO, JobHandle
from ..base import Pane, PaneHost
from .catalog_rows import CatalogSnapshot, load_catalog
from .widgets.catalog_table import CatalogTableModel

MAX_COLUMN_WIDTH = 240
NOT_YET = ("Downloading, deleting, loading and importing models from this pane is not in this build yet. "
           "Downloads work from the command line: nemo models download ID")


class ModelManagerPane(Pane):
    NAME = "model_manager"
    TITLE = "Model manager"
    SUMMARY = "The classifiers, captioning models and image editors NEMO Desktop can use, and their state."

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.model = CatalogTableModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(CatalogTableModel.SORT_ROLE)

        self.table = QTableView()
        self.table.setObjectName("catalogTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # keep the catalog's order until asked
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)  # one line per model; the tooltip has the full text
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)

        self.status_label = QLabel("")
        self.status_label.setObjectName("catalogStatus")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Read the catalog and check the weights cache again")
        self.refresh_button.clicked.connect(self.refresh)
        note = QLabel(NOT_YET)
        note.setObjectName("modelManagerNotYet")
        note.setWordWrap(True)
        note.setEnabled(False)

        heading = QLabel(f"<h2>{self.TITLE}</h2>")
        top = QHBoxLayout()
        top.addWidget(heading, 1)
        top.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.status_label)
        layout.addWidget(note)
        self._job: JobHandle | None = None
        self._header_state = None

    def on_first_shown(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        if self._job is not None and self._job.active:
            return
        self.refresh_button.setEnabled(False)
        self.status_label.setText("Reading the model catalog…")
        self._job = self.host.jobs.submit(load_catalog, title="Reading the model catalog", lane=IO,
                                         ask_before_quit=False)
        self._job.sig_done.connect(self._on_loaded)
        self._job.sig_failed.connect(self._on_failed)  # the main window shows the error dialog too
        self._job.sig_finished.connect(lambda _o: self.refresh_button.setEnabled(True))

    def _on_loaded(self, snapshot: CatalogSnapshot) -> None:
        self.model.set_rows(snapshot.rows)
        if self._header_state is not None:
            self.table.horizontalHeader().restoreState(self._header_state)
            self._header_state = None
        else:
            self.table.resizeColumnsToContents()
            for col in range(self.model.columnCount()):
                self.table.setColumnWidth(col, min(self.table.columnWidth(col), MAX_COLUMN_WIDTH))
        downloaded = sum(r.status in ("downloaded", "local") for r in snapshot.rows)
        self.status_label.setText(f"{len(snapshot.rows)} models in the catalog, {downloaded} on this computer "
                                  f"(★ the paper's default). Weights cache: {snapshot.cache_dir}")

    def _on_failed(self, error: dict) -> None:
        self.status_label.setText(f"The catalog could not be read: {error.get('message')}")

    def save_state(self, settings: QSettings) -> None:
        if self.model.rowCount():
            settings.setValue("catalog_header", self.table.horizontalHeader().saveState())

    def restore_state(self, settings: QSettings) -> None:
        self._header_state = settings.value("catalog_header")


PANE = ModelManagerPane
