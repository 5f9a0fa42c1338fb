"""The catalog as a Qt table model: one row per model, sortable; estimates are marked with "≈".

The status column joins what is on disk (the row) with live state the pane sets: a running download's
percentage and the models in memory ("loaded").
"""
from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt

from ..catalog_rows import CatalogRow
from ....widgets.row_table_model import RowTableModel

COLUMNS = ("Model", "Kind", "Status", "Size", "GPU memory (bf16)", "License", "Gated", "Recommended GPU")
KIND_TEXT = {"classifier": "Classifier", "mllm": "Multimodal LLM", "editor": "Image editor"}
_SORT_ROLE = Qt.ItemDataRole.UserRole + 1


def _size(n_bytes: int) -> str:
    from nemo_desktop.core.models.catalog import format_size

    return format_size(n_bytes)


class CatalogTableModel(RowTableModel):
    columns = COLUMNS
    SORT_ROLE = _SORT_ROLE

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[CatalogRow] = []
        self.downloading: dict[str, float | None] = {}  # entry id -> fraction done (None: starting)
        self.loaded: dict[str, str] = {}  # entry id -> kind it is loaded as
        self.loading: dict[str, str] = {}  # entry id -> "queued" (waits behind another job) | "loading…"

    def set_rows(self, rows: list[CatalogRow]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def replace_row(self, row: CatalogRow) -> None:
        for i, r in enumerate(self.rows):
            if r.entry.id == row.entry.id:
                self.rows[i] = row
                self._status_changed(i)
                return

    def row_of(self, entry_id: str) -> int:
        return next((i for i, r in enumerate(self.rows) if r.entry.id == entry_id), -1)

    def set_downloading(self, entry_id: str, fraction: float | None, active: bool = True) -> None:
        if active:
            self.downloading[entry_id] = fraction
        else:
            self.downloading.pop(entry_id, None)
        self._status_changed(self.row_of(entry_id))

    def set_loading(self, entry_id: str, state: str | None) -> None:
        """A load of `entry_id` waits ("queued") or runs ("loading…"); None: it ended."""
        if state:
            self.loading[entry_id] = state
        else:
            self.loading.pop(entry_id, None)
        self._status_changed(self.row_of(entry_id))

    def set_loaded(self, loaded: dict[str, str]) -> None:
        """`loaded`: kind -> ref of the models in memory (refs that are catalog ids mark their rows)."""
        self.loaded = {ref: kind for kind, ref in loaded.items()}
        if self.rows:
            self.dataChanged.emit(self.index(0, 2), self.index(len(self.rows) - 1, 2))

    def status_text(self, row: CatalogRow) -> str:
        e = row.entry
        if e.id in self.loading:
            return self.loading[e.id]
        if e.id in self.loaded:
            return "loaded"
        if e.id in self.downloading:
            fraction = self.downloading[e.id]
            return "downloading…" if fraction is None else f"downloading {100 * fraction:.0f}%"
        if row.status == "partial" and row.size_on_disk:
            return f"partial ({_size(row.size_on_disk)})"
        return row.status

    def _status_changed(self, i: int) -> None:
        if i >= 0:
            self.dataChanged.emit(self.index(i, 2), self.index(i, 2))

    def data(self, index: QModelIndex | QPersistentModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        e, col = row.entry, index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.status_text(row) if col == 2 else self._text(row, col)
        if role == _SORT_ROLE:
            return (e.id, e.kind, self.status_text(row), e.disk_size_bytes, e.vram_bf16_gb, e.license, e.gated,
                    e.recommended_gpu)[col]
        if role == Qt.ItemDataRole.ToolTipRole:
            tip = f"{e.description}\nRepository: {e.repo} ({e.revision})"
            if COLUMNS[col] == "License":  # the column elides a long one
                tip = f"License: {e.license}\n{tip}"
            if e.estimated:
                tip += f"\nEstimated: {', '.join(e.estimated)}"
            if e.notes:
                tip += f"\n{e.notes}"
            if e.origin != "shipped":
                tip += f"\nFrom your catalog: {e.origin}"
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
        if col == 3:
            return ("≈ " if "disk_size_bytes" in e.estimated else "") + _size(e.disk_size_bytes)
        if col == 4:
            return ("≈ " if "vram_bf16_gb" in e.estimated else "") + f"{e.vram_bf16_gb:g} GB"
        if col == 5:
            return e.license
        if col == 6:
            return "yes" if e.gated else "no"
        return e.recommended_gpu
