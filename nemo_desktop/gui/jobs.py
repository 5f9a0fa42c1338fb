"""Run core jobs (`fn(ctx: JobContext)`) off the GUI thread and report back through Qt signals.

Two lanes, as the design asks: "gpu" runs one job at a time in submission order (models compete for GPU
memory), "io" runs several at once (thumbnails, downloads, folder scans). Each lane is a QThreadPool.

The worker never touches widgets: it emits on a private relay object that lives in the GUI thread, so every
public signal of a `JobHandle` is emitted in the GUI thread (queued connection) and slots may update
widgets directly. The GUI thread never blocks on a job; only `JobRunner.wait()` (used when the window
closes) spins a bounded local event loop.

Jobs that end together (an indexing run, the classification queued behind it, a listing on the I/O lane) are
handed to their handlers one per event-loop turn (a `TurnQueue`): each ending may rebuild a pane, and Qt would
otherwise run every posted ending back to back before the next repaint or timer, which stalled the window.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import replace
import os
import threading
import time
from typing import Any, Callable

from PySide6.QtCore import QEventLoop, QObject, QRunnable, QThread, QThreadPool, QTimer, Signal, Slot

from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext, JobOutcome, Progress, run_job
from nemo_desktop.core.app.worker.protocol import JobSpec

from .turns import TurnQueue

log = logging.getLogger(__name__)

GPU, IO = "gpu", "io"
LANES = (GPU, IO)

# States of a job, in the order they can happen.
QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINAL_STATES = (DONE, FAILED, CANCELLED)

# A job may report progress thousands of times a second; the GUI needs ~20 updates a second at most.
PROGRESS_INTERVAL_S = 0.05
# Worker threads yield the CPU to the window's thread: on a machine with few cores a busy job otherwise
# delays repaints and clicks by 100 ms and more. Only matters when the cores are contended. At 10 a worker
# has a tenth of the window thread's scheduler weight (at 5, a third): an indexing job's decoder threads,
# which inherit it, then no longer crowd the window thread out of a 2-core machine.
BACKGROUND_NICE = 10
_thread_state = threading.local()


def _run_in_background_priority() -> None:
    """Lower the calling worker thread's priority (once per thread)."""
    if getattr(_thread_state, "lowered", False):
        return
    _thread_state.lowered = True
    try:  # Linux: nice values are per thread
        current = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), max(current, BACKGROUND_NICE))
    except (AttributeError, OSError):  # other systems: Qt's thread priority
        QThread.currentThread().setPriority(QThread.Priority.LowPriority)


class _Relay(QObject):
    """Created in the GUI thread, emitted from the worker: Qt queues each emission to the GUI thread."""

    started = Signal()
    progress = Signal(object)
    partial = Signal(object)
    finished = Signal(object)  # JobOutcome


class _JobRunnable(QRunnable):
    def __init__(self, fn: Callable[[JobContext], Any], token: CancelToken, relay: _Relay):
        super().__init__()
        self.setAutoDelete(False)  # the JobHandle owns it (and tryTake() needs it alive)
        self._fn = fn
        self._token = token
        self._relay = relay
        self._last_emit = 0.0
        self._last_stage: str | None = None

    def _on_progress(self, p: Progress) -> None:
        now = time.monotonic()
        final = p.total is not None and p.done >= p.total
        if p.stage != self._last_stage or final or now - self._last_emit >= PROGRESS_INTERVAL_S:
            self._last_emit, self._last_stage = now, p.stage
            self._relay.progress.emit(p)

    def run(self) -> None:  # worker thread
        _run_in_background_priority()
        relay = self._relay
        if self._token.cancelled:  # cancelled while queued: do not start the work at all
            relay.finished.emit(JobOutcome("cancelled", error=JobCancelled().to_dict()))
            return
        relay.started.emit()
        ctx = JobContext(on_progress=self._on_progress, on_partial=relay.partial.emit, cancel=self._token)
        try:
            outcome = run_job(self._fn, ctx)
        except BaseException as exc:  # noqa: BLE001 - run_job never raises, but the handle must always end
            outcome = JobOutcome("failed", error={"type": type(exc).__name__, "message": str(exc),
                                                  "hint": None, "detail": repr(exc)})
        relay.finished.emit(outcome)


class JobHandle(QObject):
    """One submitted job. All signals arrive in the GUI thread; `sig_finished` always comes last."""

    sig_started = Signal()
    sig_progress = Signal(object)    # nemo_desktop.core.base.job_context.Progress
    sig_partial = Signal(object)     # whatever the job passed to ctx.partial()
    sig_done = Signal(object)        # the job's return value
    sig_failed = Signal(dict)        # {"type", "message", "hint", "detail"}
    sig_cancelled = Signal()
    sig_finished = Signal(object)    # JobOutcome, after exactly one of done / failed / cancelled

    def __init__(self, job_id: int, title: str, lane: str, fn: Callable[[JobContext], Any],
                 report_errors: bool, ask_before_quit: bool = True,
                 on_end: Callable[["JobHandle"], None] | None = None, parent: QObject | None = None,
                 visible: bool = True, *, endings: TurnQueue):
        super().__init__(parent)
        self._on_end = on_end
        self.ask_before_quit = ask_before_quit
        self.visible = visible
        self.job_id = job_id
        self.title = title
        self.lane = lane
        self.report_errors = report_errors
        self.state = QUEUED
        self.progress: Progress | None = None
        # The whole job's fraction as shown: it never goes back (a stage that restarts its count keeps the bar
        # where it was); with the time it took, the time left is estimated.
        self.fraction: float | None = None
        self._first_fraction: tuple[float, float] | None = None  # (monotonic time, fraction) of the first report
        self.outcome: JobOutcome | None = None
        self.token = CancelToken()
        self._relay = _Relay(self)
        self._relay.started.connect(self._on_started)
        self._relay.progress.connect(self._on_progress)
        self._relay.partial.connect(self.sig_partial)
        self._endings = endings  # the runner's: endings handled one per event-loop turn
        self._relay.finished.connect(self._ended)
        self.runnable = _JobRunnable(fn, self.token, self._relay)
        self._pool: QThreadPool | None = None

    @property
    def active(self) -> bool:
        return self.state not in FINAL_STATES

    @property
    def cancel_requested(self) -> bool:
        return self.token.cancelled

    def cancel(self) -> None:
        """Ask the job to stop at its next check; a queued job is dropped before it starts."""
        if not self.active:
            return
        self.token.cancel()
        if self.state == QUEUED and self._pool is not None and self._pool.tryTake(self.runnable):
            self._on_finished(JobOutcome("cancelled", error=JobCancelled().to_dict()))

    def __repr__(self) -> str:
        return f"<JobHandle {self.job_id} {self.lane} {self.state} {self.title!r}>"

    @Slot()
    def _on_started(self) -> None:
        if self.state == QUEUED:
            self.state = RUNNING
            self.sig_started.emit()

    @Slot(object)
    def _on_progress(self, p: Progress) -> None:
        if self.active:
            p = self._monotone(p, time.monotonic())
            self.progress = p
            self.sig_progress.emit(p)

    def _monotone(self, p: Progress, now: float) -> Progress:
        """`p` with the job's overall fraction never below one shown before, and the time left estimated."""
        f = p.overall_fraction
        if f is None:
            if self.fraction is None:
                return p  # nothing measured yet: busy
            f = self.fraction  # a stage without a count, after counted ones: the bar stays where it was
        f = max(self.fraction or 0.0, min(RUNNING_CAP, f))
        self.fraction = f
        if self._first_fraction is None:
            self._first_fraction = (now, f)
        return replace(p, overall=f, seconds_left=estimate_seconds_left(self._first_fraction, (now, f)))

    @Slot(object)
    def _ended(self, outcome: JobOutcome) -> None:
        self._endings.put((self, outcome))

    def _on_finished(self, outcome: JobOutcome) -> None:
        if not self.active:  # tryTake() raced with a worker that had already started: keep the first
            return
        self.outcome = outcome
        self.state = {"done": DONE, "cancelled": CANCELLED}.get(outcome.status, FAILED)
        if self.state == DONE:
            self.sig_done.emit(outcome.result)
        elif self.state == CANCELLED:
            self.sig_cancelled.emit()
        else:
            self.sig_failed.emit(outcome.error or {"message": "The job failed without a description."})
        self.sig_finished.emit(outcome)
        if self._on_end is not None:
            self._on_end(self)


# The most a running job's bar shows: 100 % is said when the job has returned (its page and row say "Done."), never
# by a stage that reached its own total while the job goes on (issue 43: "192 of 360" at 100 %).
RUNNING_CAP = 0.99
MIN_ESTIMATE_S = 3.0  # no time left is guessed from less than this much measured progress
MIN_ESTIMATE_FRACTION = 0.02


def estimate_seconds_left(first: tuple[float, float], now: tuple[float, float]) -> float | None:
    """Seconds left at the rate measured since the first report ((time, fraction) pairs); None when too little
    has been measured to say."""
    (t0, f0), (t1, f1) = first, now
    if f1 >= 1.0:
        return 0.0
    if t1 - t0 < MIN_ESTIMATE_S or f1 - f0 < MIN_ESTIMATE_FRACTION:
        return None
    return (1.0 - f1) * (t1 - t0) / (f1 - f0)


def describe_seconds_left(seconds: float | None) -> str:
    """'about 3 min left', or '' when unknown or done."""
    if seconds is None or seconds <= 0:
        return ""
    if seconds < 60:
        return "less than a minute left"
    if seconds < 90 * 60:
        return f"about {max(1, round(seconds / 60))} min left"
    return f"about {seconds / 3600:.1f} h left"


class JobRunner(QObject):
    """Submits jobs to the two lanes and keeps the list of active ones for the status area."""

    sig_job_added = Signal(object)     # JobHandle
    sig_job_finished = Signal(object)  # JobHandle (state is final)
    sig_idle = Signal()                # the last active job has finished

    def __init__(self, io_threads: int = 4, parent: QObject | None = None):
        super().__init__(parent)
        self._pools = {GPU: QThreadPool(self), IO: QThreadPool(self)}
        self._pools[GPU].setMaxThreadCount(1)
        # Keep the single GPU thread alive: CUDA libraries keep per-thread state that is costly to rebuild.
        self._pools[GPU].setExpiryTimeout(-1)
        self._pools[IO].setMaxThreadCount(max(1, io_threads))
        self._ids = itertools.count(1)
        self._active: dict[int, JobHandle] = {}
        self._endings = TurnQueue(lambda ending: ending[0]._on_finished(ending[1]), self)
        # Where `JobSpec` jobs run (core/app/worker/hosts.py): the app's process, or the model worker process.
        self.model_host = None

    def submit(self, fn: "Callable[[JobContext], Any] | JobSpec", *, title: str, lane: str = GPU,
               report_errors: bool = True, ask_before_quit: bool = True, visible: bool = True) -> JobHandle:
        """Queue `fn(ctx)` on `lane`.

        `report_errors=False`: the caller shows failures itself (otherwise the main window does).
        `ask_before_quit=False`: housekeeping (reading the catalog, a thumbnail) that closing the window
        may cancel without asking the user.
        `visible=False`: not listed in the status area (thumbnail batches: many, short, shown in place).
        A `JobSpec` (a model job described as data) runs through `model_host`: in the app's process or in the
        model worker process, as the settings say; the handle behaves the same either way.
        """
        if lane not in self._pools:
            raise ValueError(f"unknown lane {lane!r}; expected one of {LANES}")
        if isinstance(fn, JobSpec):
            fn = self._spec_job(fn, title)
        handle = JobHandle(next(self._ids), title, lane, fn, report_errors, ask_before_quit,
                           on_end=self._on_job_finished, parent=self, visible=visible, endings=self._endings)
        self._active[handle.job_id] = handle
        handle._pool = self._pools[lane]
        if visible:
            log.info("job %d queued on %s lane: %s", handle.job_id, lane, title)
        self.sig_job_added.emit(handle)
        self._pools[lane].start(handle.runnable)
        return handle

    def _spec_job(self, spec: JobSpec, title: str) -> Callable[[JobContext], Any]:
        host = self.model_host
        if host is None:
            raise RuntimeError("JobRunner.model_host is not set: a JobSpec needs somewhere to run")
        return lambda ctx: host.run(spec, ctx, title)

    def active_jobs(self) -> list[JobHandle]:
        return list(self._active.values())

    @property
    def busy(self) -> bool:
        return bool(self._active)

    def cancel_all(self) -> None:
        # Queued GPU jobs first, so the pool does not start one while the running one is being stopped.
        for handle in sorted(self._active.values(), key=lambda h: h.state != QUEUED):
            handle.cancel()

    def wait(self, timeout_ms: int) -> bool:
        """Spin a local event loop (the window keeps painting) until idle or timeout; True when idle."""
        if not self._active:
            return True
        loop = QEventLoop()
        self.sig_idle.connect(loop.quit)
        timer = QTimer(singleShot=True, interval=max(0, timeout_ms))
        timer.timeout.connect(loop.quit)
        timer.start()
        try:
            if self._active:
                loop.exec()
        finally:
            timer.stop()
            try:
                self.sig_idle.disconnect(loop.quit)
            except RuntimeError:  # the runner's owner was deleted while the loop ran (application exit)
                return True
        return not self._active

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Cancel everything and wait (bounded) for the worker threads; True when all have ended."""
        deadline = time.monotonic() + timeout_ms / 1000
        self.cancel_all()
        idle = self.wait(timeout_ms)
        for pool in self._pools.values():
            remaining = max(0, int((deadline - time.monotonic()) * 1000))
            idle = pool.waitForDone(remaining) and idle
        return idle

    def _on_job_finished(self, handle: JobHandle) -> None:
        self._active.pop(handle.job_id, None)
        if handle.visible or handle.state == FAILED:
            log.info("job %d %s after %.2f s: %s", handle.job_id, handle.state,
                     handle.outcome.seconds if handle.outcome else 0.0, handle.title)
        # Hand the finished handle to Python's reference counting: whoever still shows it keeps it alive.
        handle.setParent(None)
        self.sig_job_finished.emit(handle)
        if not self._active:
            self.sig_idle.emit()
