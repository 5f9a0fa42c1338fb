"""The batch table: after a diagnosis of several images, one row per image (thumbnail, true → predicted, best
CEI, the explanation in short, status) that fills as the run goes. Activating a row (double-click or Enter) asks
for its result in the result view; the Export button asks for the combined report (core/reports/batch.py).

Statuses are shown in their tone: a finding green, a skipped image or "no cause found" (hypotheses tested, none
raised P(true)) neutral grey, "nothing could be tested" amber with its reason (not a finding either way), a real
failure red with its error and hint in the tooltip.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QModelIndex, QSize, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QColor, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from nemo_desktop.core.base.batch_items import CANCELLED, STATUSES, WAITING, BatchItem, describe_counts

from ....jobs import IO, JobHandle
from ....thumbnails import ThumbnailLoader, ThumbRequest
from ....widgets.buttons import action_button
from ....widgets.report_path import ask_report_path, report_format
from ....widgets.row_table_model import RowTableModel
from ....widgets.table_columns import keep_header_words_whole

THUMB_SIDE = 56
ITEM_ROLE = Qt.ItemDataRole.UserRole + 1
SORT_ROLE = Qt.ItemDataRole.UserRole + 2  # numbers sort as numbers, statuses in their display order
TONE_COLOURS = {"finding": "#2e7d32", "neutral": "#616161", "untested": "#a15c00", "failure": "#c62828"}
EXPLANATION_CHARS = 140
COL_IMAGE, COL_FILE, COL_TRUTH, COL_CEI, COL_EXPLANATION, COL_STATUS = range(6)


class BatchTableModel(RowTableModel):
    columns = ("Image", "File", "True → predicted", "Best CEI", "Explanation", "Status")

    def __init__(self, thumbnails: ThumbnailLoader | None = None, parent=None):
        super().__init__(parent)
        self.thumbnails = thumbnails
        if thumbnails is not None:
            thumbnails.sig_ready.connect(self._thumbnails_ready)

    def set_items(self, items: list[BatchItem]) -> None:
        self.beginResetModel()
        self.rows = items
        self.endResetModel()

    def row_changed(self, row: int) -> None:
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(self.columns) - 1))

    def _thumbnail(self, row: int, it: BatchItem) -> QPixmap | None:
        pm = self.thumbnails.pixmap(ThumbRequest(("batch", row), it.image_path))
        longest = max(pm.width(), pm.height()) if pm is not None else 0
        if longest and longest * 2 <= THUMB_SIDE:  # small images (digits, 32-px crops) grow by whole pixels
            factor = THUMB_SIDE // longest
            pm = pm.scaled(pm.width() * factor, pm.height() * factor, Qt.AspectRatioMode.KeepAspectRatio,
                           Qt.TransformationMode.FastTransformation)
        return pm

    def _thumbnails_ready(self, keys: list) -> None:
        for key in keys:
            if isinstance(key, tuple) and key[0] == "batch" and 0 <= key[1] < len(self.rows):
                self.dataChanged.emit(self.index(key[1], COL_IMAGE), self.index(key[1], COL_IMAGE))

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        it: BatchItem = self.rows[index.row()]
        col = index.column()
        if role == ITEM_ROLE:
            return it
        if role == SORT_ROLE:
            if col == COL_CEI:
                return float("-inf") if it.cei is None else float(it.cei)
            if col == COL_STATUS:
                return STATUSES.index(it.status) if it.status in STATUSES else len(STATUSES)
            if col == COL_IMAGE:
                return index.row()
            return str(self.data(index, Qt.ItemDataRole.DisplayRole) or "").lower()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == COL_FILE:
                return it.name
            if col == COL_TRUTH:
                return it.truth_text()
            if col == COL_CEI:
                return "—" if it.cei is None else f"{it.cei:+.1f}"
            if col == COL_EXPLANATION:
                text = it.summary_text()
                return text if len(text) <= EXPLANATION_CHARS else text[:EXPLANATION_CHARS - 1] + "…"
            if col == COL_STATUS:
                return it.status
            return None
        if role == Qt.ItemDataRole.DecorationRole and col == COL_IMAGE and self.thumbnails is not None:
            return self._thumbnail(index.row(), it)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == COL_FILE:
                return it.image_path + (f"\nTrue class {it.label_note}" if it.label_note else "")
            if col in (COL_EXPLANATION, COL_STATUS):
                tip = it.summary_text()
                return tip + (f"\n\nWhat to do: {it.hint}" if it.hint else "")
            return None
        if role == Qt.ItemDataRole.ForegroundRole and col in (COL_EXPLANATION, COL_STATUS, COL_CEI):
            colour = TONE_COLOURS.get(it.tone)
            return QColor(colour) if colour else None
        if role == Qt.ItemDataRole.TextAlignmentRole and col == COL_CEI:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class BatchPanel(QWidget):
    """The batch table with its summary line (n per status) and the Export button."""

    sig_open_item = Signal(object)  # the activated BatchItem

    def __init__(self, host, thumbnails: ThumbnailLoader | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.host = host
        self.setObjectName("batchPanel")
        self.model = BatchTableModel(thumbnails, self)
        self.summary = QLabel("")
        self.summary.setObjectName("batchSummary")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.export_button = action_button(
            "Export batch report…", self.export, "One HTML or PDF report of every image of the batch: a summary "
            "with n per status, this table, and each explained image's section", "exportBatchButton")
        self.export_status = QLabel("")
        self.export_status.setObjectName("batchExportStatus")
        self.export_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableView()
        self.table.setObjectName("batchTable")
        self.proxy = QSortFilterProxyModel(self)  # click a header to sort; rows keep their item when sorted
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(COL_IMAGE, Qt.SortOrder.AscendingOrder)  # the order of the run
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.verticalHeader().setDefaultSectionSize(THUMB_SIDE + 6)
        self.table.verticalHeader().hide()
        self.table.setIconSize(QSize(THUMB_SIDE, THUMB_SIDE))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        header.setSectionResizeMode(COL_EXPLANATION, QHeaderView.ResizeMode.Stretch)
        for col, width in ((COL_IMAGE, THUMB_SIDE + 12), (COL_FILE, 130), (COL_TRUTH, 150), (COL_CEI, 70),
                           (COL_STATUS, 190)):
            self.table.setColumnWidth(col, width)
        keep_header_words_whole(self.table)
        self.table.activated.connect(self._activated)  # double-click, or Enter on the current row
        hint = QLabel("Double-click a row, or press Enter, to open its result below.")
        hint.setEnabled(False)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.export_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        bottom = QHBoxLayout()
        bottom.addWidget(hint)
        bottom.addStretch(1)
        bottom.addWidget(self.export_status)
        layout.addLayout(bottom)
        self.refresh()

    @property
    def items(self) -> list[BatchItem]:
        return self.model.rows

    def set_items(self, items: list[BatchItem]) -> None:
        self.model.set_items(items)
        self.export_status.setText("")
        self.refresh()

    def row_changed(self, row: int) -> None:
        self.model.row_changed(row)
        self.refresh()

    def refresh(self) -> None:
        items = self.items
        self.summary.setText(f"Batch: {describe_counts(items)}" if items else "")
        running = any(it.status == WAITING for it in items)
        self.export_button.setEnabled(bool(items) and not running)

    def _activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self.sig_open_item.emit(self.proxy.data(index, ITEM_ROLE))

    def export(self, target: Path | None = None) -> JobHandle | None:
        """Export the batch as one HTML or PDF report (by the file's extension) on the I/O lane; asks where when
        `target` is None. None when there is nothing to export or the user cancels."""
        from nemo_desktop.core.reports.batch import export_batch_json, export_batch_report

        items = [replace(it) for it in self.items]  # a snapshot: the job reads it on another thread
        if not items:
            return None
        target = target or ask_report_path(self, "Export the batch report", "batch-report.html", allow_json=True)
        if target is None:
            return None
        fmt = report_format(target)
        session, status = self.host.session, self.export_status
        if fmt == "json":  # the rows with their outcome and reason, as `--json` gives them
            job = lambda ctx: export_batch_json(items, target)  # noqa: E731
        else:
            job = lambda ctx: export_batch_report(items, session.store(), fmt, target, ctx=ctx)  # noqa: E731
        handle = self.host.jobs.submit(job, title=f"Exporting the batch report as {fmt.upper()}", lane=IO)
        status.setText("Exporting…")
        handle.sig_done.connect(lambda out: status.setText(f"Wrote {out}"))
        handle.sig_done.connect(lambda out: self.host.show_status(f"Exported the batch report to {out}"))
        handle.sig_failed.connect(lambda e: status.setText(f"Export failed: {e.get('message')}"))
        return handle

    # -- following a run ----------------------------------------------------------------------------------
    def watch(self, handle, items: list[BatchItem]) -> None:
        """Fill the rows of `items` that wait for the run `handle` (in the order of its samples) as its
        per-sample outcomes arrive; what is still waiting when it ends is marked cancelled or failed."""
        self._handle = handle
        self._waiting_rows = [i for i, it in enumerate(items) if it.status == WAITING]
        self.set_items(items)
        handle.sig_partial.connect(lambda item, h=handle: self._partial(h, item))
        handle.sig_finished.connect(lambda outcome, h=handle: self._finished(h, outcome))

    def _partial(self, handle, item) -> None:
        if handle is not self._handle or not isinstance(item, dict) or item.get("kind") != "outcome":
            return
        i = item.get("index", -1)
        if not 0 <= i < len(self._waiting_rows):
            return
        row, outcome = self._waiting_rows[i], item["outcome"]
        if outcome.error:
            self.items[row].fail(outcome.error)
        elif outcome.result is not None:
            self.items[row].finish(outcome.result)
        self.row_changed(row)

    def _finished(self, handle, outcome) -> None:
        if handle is not self._handle:
            return
        for row, it in enumerate(self.items):
            if it.status != WAITING:
                continue
            if outcome.status == "cancelled":
                it.status = CANCELLED
            else:  # the run stopped (e.g. a model could not be loaded) before this image had an outcome
                it.fail(outcome.error or {"message": "The run ended without a result for this image."})
            self.model.row_changed(row)
        self.refresh()
