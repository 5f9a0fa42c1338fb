"""Work put off to a later turn of the event loop, so that one turn does not stall the window."""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer


def on_next_turn(context: QObject, fn: Callable[[], object]) -> None:
    """Run `fn` on a later event-loop turn, after the repaints and timers now due (dropped if `context` is
    deleted first).

    `QTimer.singleShot(0, …)` is a posted call, which Qt runs in the same pass as the posted events that
    caused it (the work and its repaint then still stall the window as one); a 1 ms timer comes after them.
    """
    QTimer.singleShot(1, context, fn)


class TurnQueue(QObject):
    """Hands queued items to `handler` one per event-loop turn, in order: a real 0 ms timer fires once per
    pass of the event loop, so repaints and other timers run between two items."""

    def __init__(self, handler: Callable[[Any], object], parent: QObject | None = None):
        super().__init__(parent)
        self._handler = handler
        self._pending: deque = deque()
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self._next)

    def put(self, item: Any) -> None:
        self._pending.append(item)
        if not self._timer.isActive():
            self._timer.start()

    def _next(self) -> None:
        item = self._pending.popleft()
        if self._pending:  # armed first: the next item waits for the next turn even if this one raises
            self._timer.start()
        self._handler(item)
