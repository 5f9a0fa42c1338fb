"""A simulated drag-and-drop of files onto a widget, as a real drag delivers it (drag-enter, then drop)."""
from __future__ import annotations

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication


def simulate_drop(widget, paths) -> tuple[bool, bool, QMimeData]:
    """(drag-enter accepted, drop accepted, the mime data: keep it alive while the events are used)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    args = (Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    enter = QDragEnterEvent(QPoint(30, 30), *args)  # PySide6 6.11 takes a QPoint here
    QApplication.sendEvent(widget, enter)
    drop = QDropEvent(QPointF(30, 30), *args)
    QApplication.sendEvent(widget, drop)
    return enter.isAccepted(), drop.isAccepted(), mime
