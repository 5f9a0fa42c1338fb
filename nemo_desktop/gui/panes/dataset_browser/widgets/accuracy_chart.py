"""Per-class accuracy as horizontal bars, worst class first; click a bar to show that class's images.

A painted QWidget (QPainter), not a plotting library: PySide6-Essentials has no QtCharts and matplotlib would
be a large new dependency for bars. Painting only the rows inside the exposed rectangle keeps a 1,000-class
chart (in a scroll area) as cheap as a 10-class one.
"""
from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QSizePolicy, QWidget

from nemo_desktop.core.app.dataset_browser.prediction_counts import ClassCounts

NAME_W, VALUE_W, MARGIN = 96, 78, 6
GOOD, BAD, TRACK = QColor(46, 160, 67), QColor(218, 54, 51), QColor(236, 238, 241)


class AccuracyChart(QWidget):
    sig_class_clicked = Signal(int)  # class index

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("accuracyChart")
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.class_names: list[str] = []
        self.counts: ClassCounts | None = None
        self.order = np.empty(0, np.int64)  # class index per drawn row, worst accuracy first
        self.row_h = self.fontMetrics().height() + 6

    def set_counts(self, counts: ClassCounts | None, class_names: list[str]) -> None:
        self.counts, self.class_names = counts, list(class_names)
        if counts is None:
            self.order = np.empty(0, np.int64)
        else:
            acc = counts.accuracy()
            # Worst first; classes without indexed images (NaN) last.
            self.order = np.lexsort((np.arange(len(acc)), np.where(np.isnan(acc), np.inf, acc)))
        self.setFixedHeight(max(self.row_h, len(self.order) * self.row_h) + 2 * MARGIN)
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(NAME_W + VALUE_W + 120, self.height())

    def class_at(self, pos: QPoint) -> int | None:
        row = (pos.y() - MARGIN) // self.row_h
        return int(self.order[row]) if 0 <= row < len(self.order) and pos.y() >= MARGIN else None

    def bar_rect(self, class_index: int) -> QRect:
        """The row of a class (where a click selects it)."""
        row = int(np.flatnonzero(self.order == class_index)[0])
        return QRect(0, MARGIN + row * self.row_h, self.width(), self.row_h)

    def mousePressEvent(self, event) -> None:
        c = self.class_at(event.position().toPoint())
        if c is not None and event.button() == Qt.MouseButton.LeftButton:
            self.sig_class_clicked.emit(c)

    def mouseMoveEvent(self, event) -> None:
        c = self.class_at(event.position().toPoint())
        if c is None or self.counts is None:
            self.setToolTip("")
            return
        k = self.counts
        self.setToolTip(f"{self.class_names[c]}: {k.correct[c]} of {k.indexed[c]} indexed images right"
                        f" ({k.images[c]} in the dataset). Click to show them.")

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        fm = self.fontMetrics()
        if self.counts is None or not len(self.order):
            p.setPen(self.palette().placeholderText().color())
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "Index the dataset to see accuracies.")
            return
        acc = self.counts.accuracy()
        bar_w = max(10, self.width() - NAME_W - VALUE_W - 2 * MARGIN)
        first = max(0, (event.rect().top() - MARGIN) // self.row_h)
        last = min(len(self.order), (event.rect().bottom() - MARGIN) // self.row_h + 1)
        for row in range(first, last):
            c = int(self.order[row])
            y = MARGIN + row * self.row_h
            p.setPen(self.palette().text().color())
            right = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight
            p.drawText(QRect(MARGIN, y, NAME_W - 6, self.row_h), right,
                       fm.elidedText(self.class_names[c], Qt.TextElideMode.ElideRight, NAME_W - 6))
            track = QRect(MARGIN + NAME_W, y + 3, bar_w, self.row_h - 6)
            p.fillRect(track, TRACK)
            a = acc[c]
            if not math.isnan(a):
                mixed = QColor(round(BAD.red() + (GOOD.red() - BAD.red()) * a),
                               round(BAD.green() + (GOOD.green() - BAD.green()) * a),
                               round(BAD.blue() + (GOOD.blue() - BAD.blue()) * a))
                p.fillRect(QRect(track.left(), track.top(), round(bar_w * a), track.height()), mixed)
            text = "—" if math.isnan(a) else f"{100 * a:.0f}% of {int(self.counts.indexed[c])}"
            p.drawText(QRect(track.right() + 6, y, VALUE_W, self.row_h),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, text)
