"""ProgressBar: same values as QProgressBar, but no synchronous repaint (it stalled the event loop)."""
from __future__ import annotations

from PySide6.QtWidgets import QProgressBar

from nemo_desktop.gui.widgets.progress_bar import ProgressBar


class _Counting:
    def __init__(self, *a):
        super().__init__(*a)
        self.paints = 0

    def paintEvent(self, event):
        self.paints += 1
        super().paintEvent(event)


class CountingQt(_Counting, QProgressBar):
    pass


class CountingDeferred(_Counting, ProgressBar):
    pass


def test_values_match_qprogressbar_and_painting_waits_for_the_event_loop(qtbot):
    qt, ours = CountingQt(), CountingDeferred()
    for bar in (qt, ours):
        qtbot.addWidget(bar)
        bar.show()
        qtbot.waitExposed(bar)
        qtbot.wait(20)
        bar.paints = 0
        bar.setRange(0, 0)
        bar.setRange(0, 10)  # from busy to a range: QProgressBar.reset() repaints at once
        bar.setValue(4)
    assert (ours.minimum(), ours.maximum(), ours.value()) == (qt.minimum(), qt.maximum(), qt.value()) == (0, 10, 4)
    assert qt.paints >= 1  # the reason for ProgressBar: Qt painted inside the calls
    assert ours.paints == 0 and ours.updatesEnabled()
    qtbot.waitUntil(lambda: ours.paints >= 1, timeout=2000)  # painted with the next paint event
    ours.reset()
    assert ours.value() == -1
