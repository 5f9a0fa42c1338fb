"""Per-class accuracy as a sortable table (class, images, correct, accuracy)."""
from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt

from ..filters import ClassAccuracy
from ....widgets.row_table_model import RowTableModel

COLUMNS = ("Class", "Images", "Correct", "Accuracy")
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
CLASS_ROLE = Qt.ItemDataRole.UserRole + 2


class ClassAccuracyModel(RowTableModel):
    columns = COLUMNS

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[ClassAccuracy] = []
        self.indexed = False

    def set_rows(self, rows: list[ClassAccuracy], indexed: bool) -> None:
        self.beginResetModel()
        self.rows, self.indexed = rows, indexed
        self.endResetModel()

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r, col = self.rows[index.row()], index.column()
        acc = r.accuracy if self.indexed else None
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return r.name
            if col == 1:
                return str(r.images)
            if col == 2:
                return str(r.correct) if self.indexed else "—"
            return "—" if acc is None else f"{100 * acc:.1f}%"
        if role == SORT_ROLE:
            return (r.name, r.images, r.correct, -1.0 if acc is None else acc)[col]
        if role == CLASS_ROLE:
            return r.index
        if role == Qt.ItemDataRole.TextAlignmentRole and col > 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None
