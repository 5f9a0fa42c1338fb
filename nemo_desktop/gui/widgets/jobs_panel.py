"""The status area: one row per job (title, stage, progress bar, Cancel), fed by the JobRunner's signals.

Rows are built one per event-loop turn after their job is submitted, not inside `submit()`: a handler that
submits several jobs (a finished diagnosis opens its result and lists past results) would otherwise also
build, lay out and paint a row for each in the same turn (benchmarks/gui_event_loop.py).
"""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea,
                               QVBoxLayout, QWidget)

from nemo_desktop.core.jobs import Progress

from ..jobs import CANCELLED, DONE, FAILED, JobHandle, JobRunner, describe_seconds_left
from ..turns import TurnQueue
from .progress_bar import ProgressBar

# A finished row stays visible briefly so that a fast job is still seen to have run.
FINISHED_ROW_MS = 4000

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
        if not self.handle.cancel_requested:
            self.stage.setText(progress_text(p))
        if p.overall_fraction is not None:  # the whole job's progress when sub-steps map it, else the stage's
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(1000 * p.overall_fraction))
        else:
            self.bar.setRange(0, 0)

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

    def __init__(self, runner: JobRunner, parent: QWidget | None = None):
        super().__init__(parent)
        self.runner = runner
        self.rows: dict[int, JobRow] = {}
        self.empty_label = QLabel("No jobs running.")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setEnabled(False)
        inner = QWidget()
        self._rows_layout = QVBoxLayout(inner)
        self._rows_layout.setContentsMargins(2, 2, 2, 2)
        self._rows_layout.addWidget(self.empty_label)
        self._rows_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        # Always shown: a scroll bar that appears when the rows outgrow the dock narrows every row, and each row's
        # labels, bar and button are laid out and repainted again, in the turn that added the row.
        scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(inner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)
        self._rows_to_build = TurnQueue(self._build_row, self)  # submitted jobs whose row is not built yet
        runner.sig_job_added.connect(self._add)
        runner.sig_job_finished.connect(self._finished)
        for handle in runner.active_jobs():
            self._add(handle)

    def sizeHint(self) -> QSize:
        return QSize(480, 96)  # the dock's first height: room for two jobs

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
        self._emit_summary()
        self._rows_to_build.put(handle)

    def _build_row(self, handle: JobHandle) -> None:
        row = JobRow(handle)
        row.sig_dismissed.connect(self._remove)
        self.rows[handle.job_id] = row
        self._rows_layout.insertWidget(self._rows_layout.count() - 1, row)
        self.empty_label.hide()
        if not handle.active:  # it ended before its turn came: show how, as its row would have
            row._on_finished(handle.outcome)
            self._finished(handle)

    def _finished(self, handle: JobHandle) -> None:
        if not handle.visible:
            return
        self._emit_summary()
        if handle.job_id in self.rows and handle.state != FAILED:  # done / cancelled rows go after a moment;
            QTimer.singleShot(FINISHED_ROW_MS, self, lambda: self._remove(handle.job_id))  # failed ones stay

    def _remove(self, job_id: int) -> None:
        row = self.rows.pop(job_id, None)
        if row is not None:
            row.setParent(None)
            row.deleteLater()
        self.empty_label.setVisible(not self.rows)
        self._emit_summary()

    def _emit_summary(self) -> None:
        self.sig_summary_changed.emit(self.summary())
