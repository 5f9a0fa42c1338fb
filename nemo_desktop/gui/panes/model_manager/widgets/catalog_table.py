"""The catalog as a Qt table model: one row per model, sortable; estimates are marked with "≈".

The status column joins what is on disk (the row) with live state the pane sets: a running download's
percentage and the models in memory ("loaded").
"""
from __future__ import annotations

import re

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import QTableView

from ..catalog_rows import CatalogRow
from ....widgets.row_table_model import RowTableModel

# Short headers (their full words in the header's tooltip) so that every column is readable without sideways
# scrolling at 1280×800 (issue 43 §3).
COLUMNS = ("Model", "Kind", "Status", "Size", "GPU mem.", "License", "Gated", "Rec. GPU")
HEADER_TIPS = {
    "Model": "The catalog id (★ the paper's default)",
    "Size": "Download size of the weights (≈ estimated)",
    "GPU mem.": "GPU memory the weights need in bf16 (≈ estimated)",
    "License": "The weights' license (a long one in full in the row's tooltip)",
    "Gated": "Whether the repository asks you to accept its terms on Hugging Face before downloading",
    "Rec. GPU": "Recommended GPU (in full in the row's tooltip); \"offloaded\": with CPU offload, slower",
}
KIND_TEXT = {"classifier": "Classifier", "mllm": "Multimodal LLM", "editor": "Image editor",
             "generator": "Image generator"}
_SORT_ROLE = Qt.ItemDataRole.UserRole + 1
MAX_COLUMN_WIDTH = 240
# Columns whose long text is elided (whole in the row's tooltip) when the view has no room for all: a long license
# ("trained locally on UCI handwritten digits (CC BY 4.0)"), the recommended GPU, the model id.
ELIDED = ("Model", "License", "Rec. GPU")


def short_gpu(text: str) -> str:
    """The recommended GPU in a few characters: "24 GB (RTX 3090/4090, A5000) or larger" -> "≥ 24 GB",
    "48 GB (RTX A6000); 24 GB with CPU offload" -> "48 GB (24 offloaded)"; text of another shape is kept."""
    low = text.lower()
    if low.startswith("any"):
        return "any, CPU ok" if "cpu" in low else "any"
    first = re.match(r"\s*(\d+(?:-\d+)?)\s*GB", text)
    if first is None:
        return text
    main = text.split(";")[0]
    short = ("≥ " if re.search(r"or (larger|more)", main) else "") + f"{first.group(1)} GB"
    offload = re.search(r"(\d+(?:-\d+)?)\s*GB[^;]*CPU offload", text[len(main):])
    return short + (f" ({offload.group(1)} offloaded)" if offload else "")


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

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802 - Qt's name
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return HEADER_TIPS.get(COLUMNS[section])
        return super().headerData(section, orientation, role)

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
            if COLUMNS[col] == "Model":  # the column may elide a long id
                tip = f"{e.id}\n{tip}"
            if COLUMNS[col] == "License":  # the column elides a long one
                tip = f"License: {e.license}\n{tip}"
            if COLUMNS[col] == "Rec. GPU":  # the column shows it abbreviated
                tip = f"Recommended GPU: {e.recommended_gpu}\n{tip}"
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
        return short_gpu(e.recommended_gpu)


def fit_columns(view: QTableView) -> None:
    """Each column as wide as its content (at most MAX_COLUMN_WIDTH) and never narrower than its header's text;
    when they do not all fit the view, the ELIDED columns are capped at one width, the widest giving up room first
    (down to their header's), so that every column is readable without scrolling sideways where they can fit."""
    header = view.horizontalHeader()
    view.resizeColumnsToContents()
    floor = [header.sectionSizeHint(c) for c in range(header.count())]  # the header's text, margins, sort arrow
    widths = [max(floor[c], min(header.sectionSize(c), MAX_COLUMN_WIDTH)) for c in range(header.count())]
    elided = [COLUMNS.index(name) for name in ELIDED]
    bar = view.verticalScrollBar()  # not shown yet when the rows were just set: room is kept for it
    width = view.viewport().width() - (0 if bar.isVisible() else bar.sizeHint().width())
    room = width - sum(w for c, w in enumerate(widths) if c not in elided)
    cap = max(widths[c] for c in elided)
    while cap > 0 and sum(max(floor[c], min(widths[c], cap)) for c in elided) > room:
        cap -= 1
    for c in elided:
        widths[c] = max(floor[c], min(widths[c], cap))
    for c, w in enumerate(widths):
        view.setColumnWidth(c, w)
