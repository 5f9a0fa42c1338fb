"""The status area: one row per job (title, stage, progress bar, Cancel), fed by the JobRunner's signals.

Rows are built one per event-loop turn after their job is submitted, not inside `submit()`: a handler that
submits several jobs (a finished diagnosis opens its result and lists past results) would otherwise also
build, lay out and paint a row for each in the same turn (benchmarks/gui_event_loop.py).
"""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea,
                               QVBoxLayout, QWidget)

from nemo_desktop.core.base.job_context import Progress

from ..jobs import CANCELLED, DONE, FAILED, JobHandle, JobRunner, describe_seconds_left
from ..turns import TurnQueue
from .progress_bar import ProgressBar

# A finished row stays visible briefly so that a fast job is still seen to have run.
FINISHED_ROW_MS = 4000
# The dock grows to show this many rows whole (one and a half rows were shown at 1280x800); more scroll.
SHOWN_ROWS = 4

_FINAL_TEXT = {DONE: "Done", CANCELLED: "Cancelled", FAILED: "Failed"}


def progress_text(p: Progress | None) -> str:
    if p is None:
        return "Waiting…"
    text = p.stage or "Working"
    if p.total:
        text += f" ({p.done} of {p.total})"
    if p.message:
        text += f": {p.message}"
    left = describe_seconds_left(p.seconds_left)
    if left:
        text += f" · {left}"
    return text


class JobRow(QFrame):
    sig_dismissed = Signal(int)  # job id: the user removed the row of a failed job

    def __init__(self, handle: JobHandle, parent: QWidget | None = None):
        super().__init__(parent)
        self.handle = handle
        self.setObjectName(f"jobRow{handle.job_id}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel(handle.title)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.stage = QLabel("Queued" if handle.state == "queued" else progress_text(handle.progress))
        self.stage.setTextFormat(Qt.TextFormat.PlainText)
        self.bar = ProgressBar()
        # Empty while queued, busy once started until a progress report brings a total.
        self.bar.setRange(0, 1 if handle.state == "queued" else 0)
        self.bar.setMaximumWidth(220)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop this job after its current step")
        self.cancel_button.clicked.connect(self._cancel)

        text = QVBoxLayout()
        text.setSpacing(0)
        text.addWidget(self.title)
        text.addWidget(self.stage)
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 3, 6, 3)
        row.addLayout(text, 1)
        row.addWidget(self.bar)
        row.addWidget(self.cancel_button)

        handle.sig_started.connect(self._on_started)
        handle.sig_progress.connect(self._on_progress)
        handle.sig_finished.connect(self._on_finished)

    def _on_started(self) -> None:
        self.stage.setText("Starting…")
        self.bar.setRange(0, 0)

    def _cancel(self) -> None:
        if self.handle.state == FAILED:
            self.sig_dismissed.emit(self.handle.job_id)
            return
        self.handle.cancel()
        if self.handle.active:
            self.cancel_button.setEnabled(False)
            self.stage.setText("Cancelling after the current step…")

    def _on_progress(self, p: Progress) -> None:
        if p.overall_fraction is not None:  # the whole job's progress when sub-steps map it, else the stage's
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(1000 * p.overall_fraction))
        else:
            self.bar.setRange(0, 0)
        if not self.handle.cancel_requested:  # the percentage beside the bar, not drawn over it
            percent = self.bar.percent_text()
            self.stage.setText(progress_text(p) + (f" · {percent}" if percent else ""))

    def _on_finished(self, _outcome) -> None:
        if self.handle.state == FAILED:  # a failure stays listed until dismissed (see JobsPanel._finished)
            self.cancel_button.setText("Dismiss")
            self.cancel_button.setToolTip("Remove this failed job from the list")
            self.cancel_button.setEnabled(True)
        else:
            self.cancel_button.setEnabled(False)
        self.bar.setRange(0, 1)
        self.bar.setValue(1 if self.handle.state == DONE else 0)
        self.stage.setText(_FINAL_TEXT.get(self.handle.state, self.handle.state.capitalize()))


class JobsPanel(QWidget):
    """Lists running jobs; `sig_summary_changed` carries a one-line summary for the status bar."""

    sig_summary_changed = Signal(str)
    sig_height_wanted = Signal(int)  # collapsed when idle, room for the rows when there are some

    def __init__(self, runner: JobRunner, parent: QWidget | None = None):
        super().__init__(parent)
        self.runner = runner
        self.rows: dict[int, JobRow] = {}
        self._shown_rows = 0  # rows the dock was last sized for
        self.empty_label = QLabel("No jobs running.")
        self.empty_label.setObjectName("jobsEmpty")
        self.empty_label.setEnabled(False)
        self.clear_button = QPushButton("Clear finished")
        self.clear_button.setObjectName("clearFinishedJobs")
        self.clear_button.setToolTip("Remove the failed, cancelled and done jobs from the list")
        self.clear_button.clicked.connect(self.clear_finished)
        self.clear_button.hide()
        header = QHBoxLayout()
        header.setContentsMargins(4, 0, 4, 0)
        header.addWidget(self.empty_label, 1)
        header.addWidget(self.clear_button)
        inner = QWidget()
        self._rows_layout = QVBoxLayout(inner)
        self._rows_layout.setContentsMargins(2, 2, 2, 2)
        self._rows_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        # Always shown: a scroll bar that appears when the rows outgrow the dock narrows every row, and each row's
        # labels, bar and button are laid out and repainted again, in the turn that added the row.
        scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(inner)
        self.scroll = scroll
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(scroll)
        self._rows_to_build = TurnQueue(self._build_row, self)  # submitted jobs whose row is not built yet
        runner.sig_job_added.connect(self._add)
        runner.sig_job_finished.connect(self._finished)
        for handle in runner.active_jobs():
            self._add(handle)
        self._collapse()

    def sizeHint(self) -> QSize:
        return QSize(480, self.rows_height(min(max(len(self.rows), 1), SHOWN_ROWS)))

    def rows_height(self, n: int) -> int:
        """The panel's height that shows `n` job rows whole: the header, the rows and their spacing."""
        row = max((r.sizeHint().height() for r in self.rows.values()), default=0) or self._row_height_guess()
        spacing = max(0, self._rows_layout.spacing())
        margins = self._rows_layout.contentsMargins()
        header = self.clear_button.sizeHint().height() if self.clear_button.isVisibleTo(self) else 0
        return header + margins.top() + margins.bottom() + n * row + max(0, n - 1) * spacing + 2

    def _row_height_guess(self) -> int:
        """Two lines of text and a button in a framed row (before any row exists)."""
        lines = 2 * self.fontMetrics().height() + 6 + 4
        return max(lines, self.clear_button.sizeHint().height() + 10)

    def summary(self) -> str:
        jobs = [h for h in self.runner.active_jobs() if h.visible]
        failed = sum(1 for row in self.rows.values() if row.handle.state == FAILED)
        if not jobs:
            text = "No jobs running"
        else:
            running = [h for h in jobs if h.state == "running"]
            queued = len(jobs) - len(running)
            text = f"{len(running)} job{'s' if len(running) != 1 else ''} running"
            if queued:
                text += f", {queued} queued"
        if failed:  # never "No jobs running" alone beside a failed row
            text += f"; {failed} failed (see the jobs list)"
        return text

    def _add(self, handle: JobHandle) -> None:
        if not handle.visible:
            return
        handle.sig_started.connect(self._emit_summary)
        handle.sig_started.connect(self._order_rows)
        self._emit_summary()
        self._rows_to_build.put(handle)

    def _build_row(self, handle: JobHandle) -> None:
        row = JobRow(handle)
        row.sig_dismissed.connect(self._remove)
        self.rows[handle.job_id] = row
        self._rows_layout.insertWidget(self._rows_layout.count() - 1, row)
        self._order_rows()
        self._collapse()
        if not handle.active:  # it ended before its turn came: show how, as its row would have
            row._on_finished(handle.outcome)
            self._finished(handle)

    def _finished(self, handle: JobHandle) -> None:
        if not handle.visible:
            return
        self._emit_summary()
        self._order_rows()
        self._collapse()
        if handle.job_id in self.rows and handle.state != FAILED:  # done / cancelled rows go after a moment;
            QTimer.singleShot(FINISHED_ROW_MS, self, lambda: self._remove(handle.job_id))  # failed ones stay

    def _remove(self, job_id: int) -> None:
        row = self.rows.pop(job_id, None)
        if row is not None:
            row.setParent(None)
            row.deleteLater()
        self._collapse()
        self._emit_summary()

    def clear_finished(self) -> None:
        """Remove every row whose job has ended (failed ones included)."""
        for job_id, row in list(self.rows.items()):
            if not row.handle.active:
                self._remove(job_id)

    def _order_rows(self) -> None:
        """Running jobs first, then queued ones, then the ended (failed first): a failure never sits above the
        job that runs."""
        rank = {"running": 0, "queued": 1, FAILED: 2}
        order = sorted(self.rows.values(), key=lambda r: (rank.get(r.handle.state, 3), r.handle.job_id))
        current = [self._rows_layout.itemAt(i).widget() for i in range(self._rows_layout.count() - 1)]
        if current == order:
            return
        for i, row in enumerate(order):
            self._rows_layout.removeWidget(row)
            self._rows_layout.insertWidget(i, row)

    def _collapse(self) -> None:
        """Idle: one line ("No jobs running."), so the dock takes no room it does not use; rows: room for them."""
        idle = not self.rows
        was_idle = self.scroll.isHidden()
        shown = min(len(self.rows), SHOWN_ROWS)
        changed = shown != self._shown_rows
        self._shown_rows = shown
        self.empty_label.setVisible(idle)
        self.scroll.setVisible(not idle)
        self.clear_button.setVisible(any(not r.handle.active for r in self.rows.values()))
        if idle:
            self.setMaximumHeight(self.idle_height())
        else:
            self.setMaximumHeight(16777215)
        self.updateGeometry()
        if idle != was_idle or (changed and not idle):  # room for each row, up to SHOWN_ROWS
            self.sig_height_wanted.emit(self.idle_height() if idle else self.rows_height(shown))

    def idle_height(self) -> int:
        return max(self.empty_label.sizeHint().height(), self.clear_button.sizeHint().height()) + 4

    def _emit_summary(self) -> None:
        self.sig_summary_changed.emit(self.summary())
