"""The catalog as a Qt table model: one row per model, sortable; estimates are marked with "≈"."""
from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from ..catalog_rows import CatalogRow

COLUMNS = ("Model", "Kind", "Status", "Size", "GPU memory (bf16)", "License", "Gated", "Recommended GPU")
KIND_TEXT = {"classifier": "Classifier", "mllm": "Multimodal LLM", "editor": "Image editor"}
_SORT_ROLE = Qt.ItemDataRole.UserRole + 1


def _size(n_bytes: int) -> str:
    from nemo_desktop.core.models.catalog import format_size

    return format_size(n_bytes)


class CatalogTableModel(QAbstractTableModel):
    SORT_ROLE = _SORT_ROLE

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[CatalogRow] = []

    def set_rows(self, rows: list[CatalogRow]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        e, col = row.entry, index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(row, col)
        if role == _SORT_ROLE:
            return (e.id, e.kind, row.status, e.disk_size_bytes, e.vram_bf16_gb, e.license, e.gated,
                    e.recommended_gpu)[col]
        if role == Qt.ItemDataRole.ToolTipRole:
            tip = f"{e.description}\nRepository: {e.repo} ({e.revision})"
            if e.estimated:
                tip += f"\nEstimated: {', '.join(e.estimated)}"
            if e.notes:
                tip += f"\n{e.notes}"
            return tip
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (3, 4):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    @staticmethod
    def _text(row: CatalogRow, col: int) -> str:
        e = row.entry
        if col == 0:
            return e.id + ("  ★" if e.paper_default else "")
        if col == 1:
            return KIND_TEXT.get(e.kind, e.kind)
        if col == 2:
            if row.status == "partial" and row.size_on_disk:
                return f"partial ({_size(row.size_on_disk)})"
            return row.status
        if col == 3:
            return ("≈ " if "disk_size_bytes" in e.estimated else "") + _size(e.disk_size_bytes)
        if col == 4:
            return ("≈ " if "vram_bf16_gb" in e.estimated else "") + f"{e.vram_bf16_gb:g} GB"
        if col == 5:
            return e.license
        if col == 6:
            return "yes" if e.gated else "no"
        return e.recommended_gpu
