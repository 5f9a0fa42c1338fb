"""Wheel-scrolling a settings form must scroll the form, not change the spin box or combo box that happens to
pass under the cursor. These editors take wheel events only once they have keyboard focus (a click or Tab);
before that the event goes to the enclosing scroll area.

Subclasses overriding `wheelEvent` only, not an event filter: a filter is called from C++ for every event of
the widget (each show, resize, paint), and each call into Python waits for the GIL while a job runs Python —
a form of two dozen editors made the workbench's first show measurably slower (benchmarks/gui_event_loop.py).
"""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QComboBox, QDoubleSpinBox, QSpinBox


class _WheelWhenFocused:
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # the wheel does not take the focus either

    def wheelEvent(self, event) -> None:  # noqa: N802 - Qt's name
        if self.hasFocus():
            super().wheelEvent(event)
            return
        # Sent on explicitly: Qt 6 passes an ignored wheel event up to the parents only when it came from the
        # window system, not when a program or test sent it.
        parent = self.parentWidget()
        while parent is not None and not isinstance(parent, QAbstractScrollArea):
            parent = parent.parentWidget()
        if parent is not None:
            QCoreApplication.sendEvent(parent.verticalScrollBar(), event)
        else:
            event.ignore()


class GuardedComboBox(_WheelWhenFocused, QComboBox):
    pass


class GuardedSpinBox(_WheelWhenFocused, QSpinBox):
    pass


class GuardedDoubleSpinBox(_WheelWhenFocused, QDoubleSpinBox):
    pass
