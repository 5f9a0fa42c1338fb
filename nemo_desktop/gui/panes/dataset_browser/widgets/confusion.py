"""The confusion matrix as a heat map: a QTableView over a model that reads one numpy count array.

Why a table view and not a painted widget or a plotting library: PySide6-Essentials has no QtCharts, and
matplotlib would add a large dependency for one chart. A QTableView gives, for free, what a confusion matrix
of up to 1,000 classes needs: scrolling (only visible cells are asked for), class names in the headers,
tooltips, keyboard navigation and click signals per cell. The heat map is the model's BackgroundRole.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from ....widgets.table_columns import keep_header_words_whole

CELL_PX = 34
HEADER_CHARS = 6  # predicted-class names are cut in the column headers (full name in the tooltip)


HEAT_LEVELS = 20


def _heat(fraction: float, diagonal: bool) -> QColor:
    """White to blue (right) or white to red (wrong) by the cell's share of its true class."""
    base = (33, 102, 172) if diagonal else (202, 0, 32)
    f = min(1.0, max(0.0, fraction)) ** 0.7  # small mistakes stay visible
    return QColor(*(round(255 + (c - 255) * f) for c in base))


# data() runs once per visible cell and role: colours come from a table, not built per call.
_HEAT = {diag: [_heat(k / HEAT_LEVELS, diag) for k in range(HEAT_LEVELS + 1)] for diag in (False, True)}
_WHITE = QColor(255, 255, 255)
_CENTER = int(Qt.AlignmentFlag.AlignCenter)
_DISPLAY, _BACKGROUND, _FOREGROUND, _ALIGN, _TOOLTIP = (
    Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.BackgroundRole, Qt.ItemDataRole.ForegroundRole,
    Qt.ItemDataRole.TextAlignmentRole, Qt.ItemDataRole.ToolTipRole)


class ConfusionModel(QAbstractTableModel):
    """Rows: true class; columns: predicted class; cells: image counts."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.counts = np.zeros((0, 0), np.int64)
        self.class_names: list[str] = []
        self._row_totals: list[int] = []

    def set_counts(self, counts: np.ndarray, class_names: list[str]) -> None:
        self.beginResetModel()
        self.counts = np.asarray(counts, np.int64)
        self.class_names = list(class_names)
        self._row_totals = self.counts.sum(axis=1).tolist() if self.counts.size else []
        self.endResetModel()

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else self.counts.shape[0]

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else self.counts.shape[1]

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if role not in (_DISPLAY, _BACKGROUND, _FOREGROUND, _ALIGN, _TOOLTIP) or not index.isValid():
            return None
        if role == _ALIGN:
            return _CENTER
        i, j = index.row(), index.column()
        c = self.counts.item(i, j)
        if role == _DISPLAY:
            return str(c) if c else ""
        share = c / self._row_totals[i] if c else 0.0
        if role == _BACKGROUND:
            return _HEAT[i == j][round(share * HEAT_LEVELS)] if c else None
        if role == _FOREGROUND:
            return _WHITE if share > 0.55 else None
        if role == _TOOLTIP:
            return (f"True {self.class_names[i]}, predicted {self.class_names[j]}: {c} image(s), "
                    f"{100 * share:.1f}% of the {int(self._row_totals[i])} indexed {self.class_names[i]} images."
                    "\nClick to show them.")
        return None

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):
        if section >= len(self.class_names):
            return None
        name = self.class_names[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return name if orientation == Qt.Orientation.Vertical else name[:HEADER_CHARS]
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{'True' if orientation == Qt.Orientation.Vertical else 'Predicted'}: {name}"
        return None


class ConfusionView(QTableView):
    sig_cell_clicked = Signal(int, int)  # true class, predicted class

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("confusionMatrix")
        self.confusion = ConfusionModel(self)
        self.setModel(self.confusion)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        # Fixed sizes: sizing to contents would ask for every cell of a 1,000 × 1,000 matrix.
        for header in (self.horizontalHeader(), self.verticalHeader()):
            header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
            header.setDefaultSectionSize(CELL_PX)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.verticalHeader().setMaximumWidth(160)  # long class names are cut (the tooltip has them whole)
        keep_header_words_whole(self)  # the column headers are cut to HEADER_CHARS characters: never less
        self.clicked.connect(lambda i: self.sig_cell_clicked.emit(i.row(), i.column()))

    def full_width(self) -> int:
        """The width that shows every column without sideways scrolling: the row names, the columns, the frame
        and a vertical scroll bar."""
        return (self.verticalHeader().sizeHint().width() + self.horizontalHeader().length() + 2 * self.frameWidth()
                + self.verticalScrollBar().sizeHint().width() + 2)

    def set_counts(self, counts: np.ndarray, class_names: list[str]) -> None:
        self.confusion.set_counts(counts, class_names)
