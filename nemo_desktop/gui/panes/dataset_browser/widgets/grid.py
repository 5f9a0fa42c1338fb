"""The thumbnail grid: a QListView in icon mode over a list model that holds only an index array.

The model shows `rows` (dataset rows in display order, from the numpy filter); everything else is read
from the BrowseData arrays when the view paints an item, so 100,000 images cost no Python objects per
item. Items have one size (`uniformItemSizes`) and the view lays them out in batches, so opening or
filtering shows the first screen at once while the rest is laid out between events. The thumbnail size is
the user's (`set_thumbnail_side`, the browser's slider): 48 to 256 px, made at 112 or 256 px (two disk-cache
tiers) and drawn at the chosen size.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from PySide6.QtCore import QModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen, QPixmap, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QListView, QStyle, QStyledItemDelegate, QStyleOptionViewItem

from nemo_desktop.core.analyses.competency.results import LOW_PART_TEXT, low_part

from ....thumbnails import SIDE, ThumbnailLoader, ThumbRequest
from .....core.app.dataset_browser.browse_data import BrowseData

ROW_ROLE = Qt.ItemDataRole.UserRole + 1  # the dataset row of an item
MIN_SIDE, MAX_SIDE = 48, 256  # thumbnail sizes the user can choose
LARGE_TIER = 256  # thumbnails drawn larger than SIDE are made at this size, so they are not blurred up


def cell_size(side: int) -> QSize:
    return QSize(side + 24, side + 46)


def tier_for(side: int) -> int:
    """The size thumbnails are made at for a display size: the default SIDE up to SIDE, else LARGE_TIER."""
    return SIDE if side <= SIDE else LARGE_TIER


CELL = cell_size(SIDE)
LAYOUT_BATCH = 400  # items laid out per event-loop turn (keeps each turn short at 100k items)
AWAITING_MAX = 2000  # painted items remembered while their thumbnail is made (a few screens' worth)
GOOD, BAD = QColor(46, 160, 67), QColor(218, 54, 51)


class GridModel(QStandardItemModel):
    """Rows without items: Qt keeps the row count in C++, so laying out and painting the view never calls
    Python for rowCount (it did ~36 times per painted item, each call a wait for the GIL while a job runs
    Python); only the delegate's paint and the tooltip's data() come to Python."""

    def __init__(self, thumbnails: ThumbnailLoader, parent=None):
        super().__init__(parent)
        self.setColumnCount(1)
        self.thumbnails = thumbnails
        self.data_: BrowseData | None = None
        self.rows = np.empty(0, np.int64)
        # Thumbnail key -> view row of items painted before their thumbnail existed: only those repaint when
        # it arrives (a dataChanged over every row makes the view visit all 100,000 of them).
        self._awaiting: dict[object, int] = {}
        thumbnails.sig_ready.connect(self._thumbnails_ready)

    def set_view(self, data: BrowseData | None, rows: np.ndarray) -> None:
        self.beginResetModel()
        self.data_ = data
        self.rows = np.asarray(rows, np.int64)
        self._awaiting.clear()
        self.blockSignals(True)  # the view learns of the new rows from the reset, not row by row
        self.setRowCount(len(self.rows))
        self.blockSignals(False)
        self.endResetModel()

    def dataset_row(self, index: QModelIndex) -> int:
        return int(self.rows[index.row()])

    def thumb_request(self, r: int) -> ThumbRequest:
        """Keyed by path: the same image keeps its thumbnail when the dataset is re-shown (after indexing)."""
        d = self.data_
        sha = d.sha256[r] if d.sha256 is not None else None
        return ThumbRequest(d.paths[r], d.paths[r], sha)

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or self.data_ is None:
            return None
        d, r = self.data_, int(self.rows[index.row()])
        if role == Qt.ItemDataRole.DisplayRole:
            return Path(d.paths[r]).name
        if role == ROW_ROLE:
            return r
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [d.paths[r], f"True class: {d.class_names[d.labels[r]]}"]
            if d.preds[r] >= 0:
                lines.append(f"Predicted: {d.class_names[d.preds[r]]} (p = {d.conf[r]:.3f})")
                lines.append(f"P(true class) = {d.prob_true[r]:.3f}")
            if d.competency is not None and not math.isnan(d.competency[r]):
                conf, pid = d.competency_parts[r]
                part = low_part({"competency": float(d.competency[r]), "confidence": float(conf),
                                 "id_probability": float(pid)}, d.competency_threshold)
                lines.append(f"Competency = {d.competency[r]:.3f} (confidence {conf:.3f} × P(in-distribution) "
                             f"{pid:.3f}): {LOW_PART_TEXT[part]} at {d.competency_threshold:g}")
            return "\n".join(lines)
        return None

    def pixmap_for(self, view_row: int) -> QPixmap | None:
        """The row's thumbnail, or None while it is made (the row then repaints when it arrives)."""
        req = self.thumb_request(int(self.rows[view_row]))
        pm = self.thumbnails.pixmap(req)
        if pm is None and not self.thumbnails.failed(req.key):
            self._awaiting[req.key] = view_row
            while len(self._awaiting) > AWAITING_MAX:
                del self._awaiting[next(iter(self._awaiting))]
        return pm

    def _thumbnails_ready(self, keys: list) -> None:
        rows = [row for row in (self._awaiting.pop(k, None) for k in keys) if row is not None]
        if rows:  # painted together, so close together: one range
            self.dataChanged.emit(self.index(min(rows), 0), self.index(max(rows), 0),
                                  [Qt.ItemDataRole.DecorationRole])


class GridDelegate(QStyledItemDelegate):
    """Thumbnail, a green/red frame (correct/misclassified), the true class and the prediction, and the
    competency (when scored) as a badge."""

    def __init__(self, model: GridModel, parent=None):
        super().__init__(parent)
        self.model = model
        self.side = SIDE
        self._placeholder = QPixmap(1, 1)
        self._placeholder.fill(QColor(225, 225, 225))

    def sizeHint(self, option, index) -> QSize:
        return cell_size(self.side)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        m = self.model
        d = m.data_
        if d is None:
            return
        r = int(m.rows[index.row()])
        rect = option.rect.adjusted(2, 2, -2, -2)
        painter.save()
        if option.state & QStyle.StateFlag.State_Selected:
            painter.fillRect(rect, option.palette.highlight())
        pm = m.pixmap_for(index.row())
        side = self.side
        thumb_box = QRect(rect.left() + (rect.width() - side) // 2, rect.top() + 4, side, side)
        if pm is None:
            painter.drawPixmap(thumb_box, self._placeholder)
            if m.thumbnails.failed(d.paths[r]):
                painter.setPen(QColor(120, 120, 120))
                painter.drawText(thumb_box, Qt.AlignmentFlag.AlignCenter, "unreadable")
        else:
            # Fit the box: small images (icons, dataset crops) are scaled up with nearest neighbour (the
            # painter's default) so their pixels stay crisp; larger thumbnails are reduced smoothly.
            scale = min(side / max(1, pm.width()), side / max(1, pm.height()))
            target = QRect(0, 0, max(1, round(pm.width() * scale)), max(1, round(pm.height() * scale)))
            target.moveCenter(thumb_box.center())
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, scale < 1)
            painter.drawPixmap(target, pm)
        if d.preds[r] >= 0:
            painter.setPen(QPen(GOOD if d.preds[r] == d.labels[r] else BAD, 3))
            painter.drawRect(thumb_box.adjusted(-1, -1, 1, 1))
        if d.competency is not None and not math.isnan(d.competency[r]):
            self._competency_badge(painter, thumb_box, float(d.competency[r]))
        fm = QFontMetrics(option.font)
        text_color = option.palette.highlightedText().color() if option.state & QStyle.StateFlag.State_Selected \
            else option.palette.text().color()
        painter.setPen(text_color)
        line = QRect(rect.left() + 2, thumb_box.bottom() + 4, rect.width() - 4, fm.height())
        painter.drawText(line, Qt.AlignmentFlag.AlignHCenter,
                         fm.elidedText(d.class_names[d.labels[r]], Qt.TextElideMode.ElideRight, line.width()))
        if d.preds[r] >= 0 and d.preds[r] != d.labels[r]:
            line.translate(0, fm.height())
            painter.setPen(BAD if not option.state & QStyle.StateFlag.State_Selected else text_color)
            conf = d.conf[r]
            text = f"→ {d.class_names[d.preds[r]]}" + ("" if math.isnan(conf) else f" {conf:.2f}")
            painter.drawText(line, Qt.AlignmentFlag.AlignHCenter,
                             fm.elidedText(text, Qt.TextElideMode.ElideRight, line.width()))
        painter.restore()


    threshold = 0.9  # competency below it is drawn red (the reference's threshold; the browser sets its own)

    def _competency_badge(self, painter: QPainter, box: QRect, value: float) -> None:
        """The image's competency in the thumbnail's top-right corner, red below the threshold."""
        text = f"{value:.2f}"
        fm = QFontMetrics(painter.font())
        badge = QRect(0, 0, fm.horizontalAdvance(text) + 6, fm.height() + 2)
        badge.moveTopRight(box.topRight())
        painter.fillRect(badge, BAD if value < self.threshold else GOOD)
        painter.setPen(QColor(255, 255, 255))
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, text)


def make_grid_view(model: GridModel) -> QListView:
    view = QListView()
    view.setObjectName("thumbnailGrid")
    view.setViewMode(QListView.ViewMode.IconMode)
    view.setMovement(QListView.Movement.Static)
    view.setResizeMode(QListView.ResizeMode.Adjust)
    view.setUniformItemSizes(True)
    view.setGridSize(CELL)
    view.setIconSize(QSize(SIDE, SIDE))
    view.setLayoutMode(QListView.LayoutMode.Batched)
    view.setBatchSize(LAYOUT_BATCH)
    view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
    # The model's empty rows report Qt's default flags (editable, draggable); a flags() override would make
    # every paint call Python. The view neither edits nor drags instead.
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setDragEnabled(False)
    view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
    view.setWordWrap(False)
    # Opaque: repainting the scroll bar while scrolling then stops here instead of repainting every ancestor
    # up to the main window (each a Python subclass, so each paint a wait for the GIL while a job runs).
    view.setAutoFillBackground(True)
    view.setModel(model)
    view.setItemDelegate(GridDelegate(model, view))
    return view


def set_thumbnail_side(view: QListView, side: int) -> int:
    """Show the grid's thumbnails `side` px large (clamped to MIN_SIDE..MAX_SIDE); returns the size used.
    Moving to another tier makes the thumbnails again at that size (from the disk cache when it has them)."""
    side = max(MIN_SIDE, min(MAX_SIDE, int(side)))
    delegate: GridDelegate = view.itemDelegate()
    model: GridModel = view.model()
    if delegate.side == side:
        return side
    delegate.side = side
    loader = model.thumbnails
    if loader.side != tier_for(side):
        loader.clear()
        loader.side = tier_for(side)
    view.setGridSize(cell_size(side))
    view.setIconSize(QSize(side, side))
    view.doItemsLayout()
    view.viewport().update()
    return side
