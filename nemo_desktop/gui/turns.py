"""Work put off to a later turn of the event loop, so that one turn does not stall the window."""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, QTimer


def on_next_turn(context: QObject, fn: Callable[[], object]) -> None:
    """Run `fn` on a later event-loop turn, after the repaints and timers now due (dropped if `context` is
    deleted first).

    `QTimer.singleShot(0, …)` is a posted call, which Qt runs in the same pass as the posted events that
    caused it (the work and its repaint then still stall the window as one); a 1 ms timer comes after them.
    """
    QTimer.singleShot(1, context, fn)
