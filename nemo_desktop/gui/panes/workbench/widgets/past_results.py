"""The workbench's "Past results" table: every stored explanation, newest first; a click reopens one.

A QTableWidget (items held in C++), not a Python model: measuring columns asks a model for every cell, and each
Python answer is a wait for the GIL while a job runs. Filling is spread over event-loop turns (`ROWS_PER_TURN`
at a time): a store lists up to 500 results, and filling their 4,000 cells with columns sized to contents took
about 150 ms in one turn, right after a run finished.
"""
from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from ....turns import on_next_turn
from ....widgets.table_columns import keep_header_words_whole
from ..run_job import StoredSummary

PAST_COLUMNS = ("Date", "CEI", "True → predicted", "Method", "Image", "Classifier", "MLLM", "Editor")
KEY_ROLE = Qt.ItemDataRole.UserRole + 1
ROWS_PER_TURN = 40


def past_cells(r: StoredSummary) -> tuple[str, ...]:
    return (datetime.fromtimestamp(r.created_at).strftime("%m-%d %H:%M"),
            "—" if r.cei is None else f"{r.cei:+.1f}", f"{r.true_name} → {r.pred_name}", r.method, r.image,
            *(r.models.get(role, "—") for role in ("classifier", "mllm", "editor")))


class PastResultsTable(QTableWidget):
    sig_open = Signal(str)  # the result key of the row the user clicked or activated

    def __init__(self, parent=None):
        super().__init__(0, len(PAST_COLUMNS), parent)
        self.setObjectName("pastResults")
        # CEI right after the date, so a narrow column never cuts it; the models a result came from at the end.
        self.setHorizontalHeaderLabels(list(PAST_COLUMNS))
        self.verticalHeader().hide()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        # Sized to the first turn's rows (the newest results), then left to the user: a header that resizes to
        # its contents measures every cell of every row again on each cell set (6 s to fill 250 rows in turns).
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        keep_header_words_whole(self)
        self.cellActivated.connect(lambda row, _c: self._open_row(row))
        self.cellClicked.connect(lambda row, _c: self._open_row(row))
        self._filling = 0  # which show_rows() call the pending turns belong to (a newer one cancels them)
        self._pending: list[StoredSummary] | None = None  # the rows being filled; None once all are in

    @property
    def filled(self) -> bool:
        """Every row of the last show_rows() call is in the table."""
        return self._pending is None

    def show_rows(self, rows: list[StoredSummary]) -> None:
        """Show `rows` (the first ROWS_PER_TURN now, the rest over the next turns)."""
        self._filling += 1
        self.setRowCount(len(rows))
        self._pending = list(rows)
        self._fill(self._filling, 0)

    def _fill(self, filling: int, start: int) -> None:
        if filling != self._filling or self._pending is None:
            return  # a newer listing replaced this one
        rows = self._pending
        end = min(len(rows), start + ROWS_PER_TURN)
        self.setUpdatesEnabled(False)  # one repaint for the chunk, not one per cell
        try:
            for i in range(start, end):
                self._set_row(i, rows[i])
        finally:
            self.setUpdatesEnabled(True)
        if start == 0:
            self.resizeColumnsToContents()
        if end < len(rows):
            on_next_turn(self, lambda: self._fill(filling, end))
        else:
            self._pending = None

    def _set_row(self, i: int, r: StoredSummary) -> None:
        for col, text in enumerate(past_cells(r)):
            item = QTableWidgetItem(text)
            item.setData(KEY_ROLE, r.key)
            item.setToolTip(r.explanation or "" if col in (1, 4) else text)
            if col == 1:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.setItem(i, col, item)

    def _open_row(self, row: int) -> None:
        item = self.item(row, 0)
        if item is not None:
            self.sig_open.emit(item.data(KEY_ROLE))
