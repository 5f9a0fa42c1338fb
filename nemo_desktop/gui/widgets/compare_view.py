"""Original vs counterfactual: a before/after view with a draggable split, and a difference heat map.

`BeforeAfterView` shows the original left of a vertical split line and the counterfactual right of it on
one zoomable, pannable image; drag the line (or move the slider under it) to wipe between them. The
difference tab shows |original - counterfactual| per pixel (`core.base.image_difference`), normalised to the
largest change, with its absolute scale said in words. A counterfactual of another size (some editors
change the resolution) is resized to the original's size for the comparison, and the dialog says so.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (QDialog, QGraphicsItem, QGraphicsRectItem, QLabel, QSlider, QTabWidget, QVBoxLayout,
                               QWidget)

from nemo_desktop.core.base.image_difference import DifferenceMap, difference_map

from .image_viewer import size_in_words
from .zoom_view import ZoomableImageView

HANDLE_PX = 9  # width of the split handle on screen, whatever the zoom


def qimage_to_array(image: QImage) -> np.ndarray:
    """HxWx3 uint8 RGB copy of a QImage."""
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = rgb.width(), rgb.height(), rgb.bytesPerLine()
    buf = np.frombuffer(rgb.constBits(), np.uint8, count=stride * h).reshape(h, stride)
    return buf[:, :w * 3].reshape(h, w, 3).copy()


def array_to_qimage(arr: np.ndarray) -> QImage:
    arr = np.ascontiguousarray(arr, np.uint8)
    h, w = arr.shape[:2]
    return QImage(arr.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()


def same_size(before: QImage, after: QImage) -> tuple[QImage, bool]:
    """`after` at `before`'s size; True when it had to be resized."""
    if after.size() == before.size():
        return after, False
    return after.scaled(before.size(), Qt.AspectRatioMode.IgnoreAspectRatio,
                        Qt.TransformationMode.SmoothTransformation), True


class _SplitHandle(QGraphicsRectItem):
    """The split line: dragged sideways only, within the image."""

    def __init__(self, view: "BeforeAfterView"):
        super().__init__()
        self.view = view
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsMovable)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
        self.setCursor(Qt.CursorShape.SplitHCursor)
        self.setBrush(QBrush(QColor(255, 255, 255, 110)))
        pen = QPen(QColor(255, 200, 0))
        pen.setCosmetic(True)
        pen.setWidth(2)
        self.setPen(pen)
        self.setZValue(1)
        self.setToolTip("Drag to compare: original on the left, counterfactual on the right")

    def itemChange(self, change, value):
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionChange:
            w = self.view.image_size()[0]
            x = min(max(0.0, value.x()), float(w))
            return QPointF(x, 0.0)
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged:
            self.view.set_split(round(self.pos().x()), from_handle=True)
        return super().itemChange(change, value)


class BeforeAfterView(ZoomableImageView):
    """Columns left of `split` come from `before`, the rest from `after`."""

    def __init__(self, before: QImage, after: QImage, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("beforeAfterView")
        self.before = before.convertToFormat(QImage.Format.Format_RGB888)
        after, self.resized = same_size(self.before, after)
        self.after = after.convertToFormat(QImage.Format.Format_RGB888)
        self.split = self.before.width() // 2
        self.handle = _SplitHandle(self)
        self.scene().addItem(self.handle)
        self.sig_zoom_changed.connect(lambda _s: self._place_handle())
        self.on_split_changed = lambda split: None  # the dialog keeps its slider in step
        self.set_image(self.composed())
        self._place_handle()

    def composed(self) -> QImage:
        out = self.before.copy()
        if self.split < out.width():
            p = QPainter(out)
            r = QRectF(self.split, 0, out.width() - self.split, out.height())
            p.drawImage(r, self.after, r)
            p.end()
        return out

    def set_split(self, column: int, *, from_handle: bool = False) -> None:
        column = min(max(0, int(column)), self.before.width())
        if column == self.split:
            return
        self.split = column
        self.item.setPixmap(QPixmap.fromImage(self.composed()))
        if not from_handle:
            self._place_handle()
        self.on_split_changed(column)

    def _place_handle(self) -> None:
        half = HANDLE_PX / 2 / max(self.scale_factor, 1e-6)  # the same width on screen at every zoom
        self.handle.setRect(QRectF(-half, 0, 2 * half, self.before.height()))
        if round(self.handle.pos().x()) != self.split:
            self.handle.setPos(self.split, 0)


class CompareDialog(QDialog):
    """Tabs "Before / after" (split view and slider) and "Difference" (heat map and its scale in words)."""

    def __init__(self, before: QImage, after: QImage, title: str = "Original vs counterfactual",
                 caption: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("compareDialog")
        self.setWindowTitle(title)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.split_view = BeforeAfterView(before, after)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("splitSlider")
        self.slider.setRange(0, self.split_view.before.width())
        self.slider.setValue(self.split_view.split)
        self.slider.valueChanged.connect(self.split_view.set_split)
        self.split_view.on_split_changed = self._split_moved
        size_note = f"Both {size_in_words(self.split_view.before)}."
        if self.split_view.resized:
            size_note = (f"The counterfactual ({size_in_words(after)}) was resized to the original's "
                         f"{size_in_words(before)} to compare them.")
        pair = QWidget()
        v = QVBoxLayout(pair)
        v.addWidget(QLabel("Left of the line: <b>original</b> \u00b7 right: <b>counterfactual</b>. Drag the line or "
                           "the slider; wheel to zoom, drag the image to pan."))
        v.addWidget(self.split_view, 1)
        v.addWidget(self.slider)

        self.difference: DifferenceMap = difference_map(qimage_to_array(self.split_view.before),
                                                        qimage_to_array(self.split_view.after))
        self.diff_view = ZoomableImageView()
        self.diff_view.setObjectName("differenceView")
        self.diff_view.set_image(array_to_qimage(self.difference.heat))
        diff = QWidget()
        dv = QVBoxLayout(diff)
        dv.addWidget(self.diff_view, 1)
        self.scale_label = QLabel(self.difference.in_words())
        self.scale_label.setObjectName("differenceScale")
        self.scale_label.setWordWrap(True)
        self.scale_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        dv.addWidget(self.scale_label)

        self.tabs = QTabWidget()
        self.tabs.addTab(pair, "Before / after")
        self.tabs.addTab(diff, "Difference |original \u2212 counterfactual|")
        self.tabs.currentChanged.connect(lambda _i: (self.split_view.fit(), self.diff_view.fit()))
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        note = QLabel(f"{size_note} {caption}".strip())
        note.setObjectName("compareNote")
        note.setWordWrap(True)
        layout.addWidget(note)
        self.resize(760, 700)

    def _split_moved(self, column: int) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(column)
        self.slider.blockSignals(False)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.split_view.fit()
        self.diff_view.fit()
