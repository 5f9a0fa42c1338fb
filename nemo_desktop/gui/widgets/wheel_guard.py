"""Wheel-scrolling a settings form must scroll the form, not change the spin box or combo box that happens to
pass under the cursor. Guarded widgets take wheel events only once they have keyboard focus (a click or Tab);
before that the event goes to the enclosing scroll area."""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QWidget


class _WheelGuard(QObject):
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() != QEvent.Type.Wheel or not isinstance(obj, QWidget) or obj.hasFocus():
            return False
        parent = obj.parentWidget()
        while parent is not None and not isinstance(parent, QAbstractScrollArea):
            parent = parent.parentWidget()
        if parent is not None:  # scroll what contains the form instead
            QCoreApplication.sendEvent(parent.verticalScrollBar(), event)
        return True


_GUARD: _WheelGuard | None = None


def guard_wheel(*widgets: QWidget) -> None:
    """Let `widgets` react to the wheel only when focused (and not take focus from the wheel)."""
    global _GUARD
    if _GUARD is None:
        _GUARD = _WheelGuard(QCoreApplication.instance())
    for w in widgets:
        w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        w.installEventFilter(_GUARD)
