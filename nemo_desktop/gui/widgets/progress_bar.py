"""A progress bar that repaints with the window's next paint instead of at once."""
from __future__ import annotations

from PySide6.QtWidgets import QProgressBar


class ProgressBar(QProgressBar):
    """QProgressBar whose setValue / setRange / reset schedule an update() instead of calling repaint().

    Qt's own versions repaint synchronously: every dirty region of the window is painted and the backing
    store flushed right there, 5-20 ms on a busy 2-core machine. A slot that moves a few bars (a job's
    progress shown in the status area, the pane and the dialog) then stalls the event loop for that long
    each time. With updates off around the change, the one update() that re-enabling them schedules is
    painted together with everything else in the next paint event.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Opaque: a busy bar animates ~10 times a second; a transparent one makes each frame repaint its
        # parents as well (dialogs and panes are Python subclasses: each paint waits for the GIL).
        self.setAutoFillBackground(True)
        # No percentage drawn on the bar: styles drew it over the moving chunk, hard to read (issue 43 §7); the
        # line beside the bar says the stage and its count, percent_text() the figure where one is wanted.
        self.setTextVisible(False)

    def percent_text(self) -> str:
        """'42 %' of a bar with a range; '' while busy (no range)."""
        lo, hi = self.minimum(), self.maximum()
        if hi <= lo:
            return ""
        return f"{100 * (self.value() - lo) / (hi - lo):.0f} %"

    def _deferred(self, change, *args) -> None:
        if not self.isVisible() or not self.updatesEnabled():  # nothing would be repainted now anyway
            change(*args)
            return
        self.setUpdatesEnabled(False)
        try:
            change(*args)
        finally:
            self.setUpdatesEnabled(True)  # schedules update()

    def setValue(self, value: int) -> None:
        self._deferred(super().setValue, value)

    def setRange(self, minimum: int, maximum: int) -> None:
        self._deferred(super().setRange, minimum, maximum)

    def setMinimum(self, minimum: int) -> None:
        self._deferred(super().setMinimum, minimum)

    def setMaximum(self, maximum: int) -> None:
        self._deferred(super().setMaximum, maximum)

    def reset(self) -> None:
        self._deferred(super().reset)

    def show_job_progress(self, p, label=None) -> None:
        """Show a job's Progress: the whole job's fraction when the stage has a size, else busy; the stage (and
        its count) in `label`."""
        text, (lo, hi, value) = job_progress_state(p)
        if label is not None:
            label.setText(text)
        self.setRange(lo, hi)
        self.setValue(value)


def job_progress_state(p) -> tuple[str, tuple[int, int, int]]:
    """A job's Progress as (the status line, (minimum, maximum, value) of a bar): the whole job's fraction when
    it is known, else busy."""
    from ..jobs import describe_seconds_left

    text = p.stage + (f" ({p.done} of {p.total})" if p.total else "")
    left = describe_seconds_left(getattr(p, "seconds_left", None))
    if left:
        text += f" · {left}"
    fraction = p.overall_fraction
    if fraction is None:
        return text, (0, 0, 0)
    return text, (0, 1000, int(1000 * fraction))
