"""The job contract shared by the CLI and the GUI (Qt-free).

A long computation is a plain function that takes a `JobContext` (Orange3's runner-with-state):

    def run(inputs..., ctx: JobContext):
        for item in ctx.track(items, stage="Captioning"):   # checks cancel between items
            ...
            ctx.partial(result)                              # completed unit, already stored

The context reports `Progress(stage, done, total)` to whoever listens (a tqdm bar in the CLI, a Qt
signal in the GUI), carries a `CancelToken` checked between units of work, and `ctx.sub(...)` maps a
sub-step onto a slice of the parent's progress. `run_job` wraps the call and turns any exception into a
`JobOutcome` with a user-facing message plus technical detail, so callers never see a raw traceback.
"""
from __future__ import annotations

import contextlib
import contextvars
import re
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, TypeVar

from nemo_desktop.core.base.errors import JobCancelled, NemoError

T = TypeVar("T")


class CancelToken:
    """Thread-safe cancellation flag; the job checks it between units of work."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise JobCancelled()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking at once on cancel; True when cancelled."""
        return self._event.wait(seconds)


# The token of the job running in this thread: blocking I/O deep inside a model adapter (an HTTP request),
# which no JobContext reaches, is interrupted by it. Set by run_job and the CLI's cancellable_job.
_current_token: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar("nemo_cancel_token",
                                                                                     default=None)


def current_cancel_token() -> CancelToken | None:
    return _current_token.get()


@contextlib.contextmanager
def cancel_scope(token: CancelToken | None) -> Iterator[None]:
    """Make `token` the current job's cancel token in this thread for the block."""
    reset = _current_token.set(token)
    try:
        yield
    finally:
        _current_token.reset(reset)


@dataclass(frozen=True)
class Progress:
    """One progress report: `stage` names the work ("Editing image 2 of 3"), done/total count units."""

    stage: str
    done: int
    total: int | None = None
    message: str = ""
    # For byte-oriented work (downloads) the units are bytes and `rate` is units per second.
    rate: float | None = None
    # Fraction of the WHOLE job done (0..1) when the job is split into weighted sub-steps (`JobContext.sub`);
    # None when this report's own done/total is all there is to know.
    overall: float | None = None
    # Seconds the whole job still needs, estimated from its progress so far (set by the app's job runner; None
    # when it cannot be estimated yet).
    seconds_left: float | None = None

    @property
    def overall_fraction(self) -> float | None:
        """The whole job's fraction: `overall` when sub-steps mapped it, else this stage's fraction."""
        return self.overall if self.overall is not None else self.fraction

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, max(0.0, self.done / self.total))


ProgressCallback = Callable[[Progress], None]


class JobContext:
    """What a running job may do: report progress and partial results, and check for cancellation."""

    def __init__(
        self,
        on_progress: ProgressCallback | None = None,
        on_partial: Callable[[Any], None] | None = None,
        cancel: CancelToken | None = None,
        span: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        self._on_progress = on_progress
        # The slice of the root job's progress this context covers (the root, and plain sub-steps: 0..1).
        self._span = span
        self._on_partial = on_partial
        self.cancel_token = cancel or CancelToken()
        self.partial_results: list[Any] = []
        self.last_progress: Progress | None = None

    # -- cancellation -----------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        return self.cancel_token.cancelled

    def check_cancelled(self) -> None:
        self.cancel_token.raise_if_cancelled()

    # -- progress -----------------------------------------------------------------------------
    def progress(self, stage: str, done: int, total: int | None = None, message: str = "",
                 rate: float | None = None) -> None:
        p = Progress(stage, done, total, message, rate, self._overall(done, total))
        self.last_progress = p
        if self._on_progress is not None:
            self._on_progress(p)

    def report(self, p: Progress) -> None:
        """Pass on a report computed elsewhere (the model worker process's job) as it is."""
        self.last_progress = p
        if self._on_progress is not None:
            self._on_progress(p)

    def partial(self, result: Any) -> None:
        self.partial_results.append(result)
        if self._on_partial is not None:
            self._on_partial(result)

    def track(self, iterable: Iterable[T], stage: str, total: int | None = None) -> Iterator[T]:
        """tqdm-like iteration: reports progress and checks cancellation before each item."""
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.progress(stage, 0, total)
        for i, item in enumerate(iterable):
            self.check_cancelled()
            yield item
            self.progress(stage, i + 1, total)

    def _overall(self, done: int, total: int | None) -> float | None:
        if self._span == (0.0, 1.0):  # the whole job: the stage's own fraction says it all
            return None
        start, end = self._span
        frac = min(1.0, max(0.0, done / total)) if total else 0.0
        return start + (end - start) * frac

    def sub(self, prefix: str, start: float = 0.0, end: float = 1.0) -> "JobContext":
        """A child context for a sub-step that covers [start, end] of THIS context's progress (Orange3's
        `wrap_callback`): its stage names are prefixed by `prefix`, it shares the cancel token, and each of its
        reports carries `overall`, the fraction of the whole job done, so a bar can show the job's progress
        while the label shows the sub-step's. `sub(prefix)` alone covers the whole range."""
        if not 0.0 <= start <= end <= 1.0:
            raise ValueError(f"JobContext.sub: need 0 <= start <= end <= 1, got {start}, {end}")
        lo, hi = self._span
        span = (lo + (hi - lo) * start, lo + (hi - lo) * end)

        def forward(p: Progress) -> None:
            stage = f"{prefix}: {p.stage}" if prefix and p.stage else (p.stage or prefix)
            out = Progress(stage, p.done, p.total, p.message, p.rate, p.overall)
            self.last_progress = out
            if self._on_progress is not None:
                self._on_progress(out)

        child = JobContext(on_progress=forward, on_partial=self.partial, cancel=self.cancel_token, span=span)
        return child

    def stages(self, prefix: str, start: float, end: float, weights: dict[str, float]) -> "JobContext":
        """Like `sub`, for work that runs named stages of known relative cost one after the other (a method
        on one image): each stage fills its own slice of [start, end] (see `_StagedContext`), so the job's bar
        moves forward through the stages instead of refilling [start, end] for each of them."""
        return _StagedContext(self.sub(prefix, start, end), weights)

    def step_callback(self, stage: str, total: int | None = None) -> Callable[..., bool]:
        """For loops owned by a library (a diffusion sampler): report step i, return False to stop.
        Matches protocols.StepCallback `(step, total)`; `total` may be omitted by simpler callers."""

        def on_step(i: int, step_total: int | None = None) -> bool:
            self.progress(stage, i, step_total if step_total is not None else total)
            return not self.cancelled

        return on_step


_COUNTED_STAGE = re.compile(r"^(.*\S)\s+(\d+)\s*/\s*(\d+)$")  # "Editing image 2/3"


class _StagedContext(JobContext):
    """Stages in `weights` take slices of the span in proportion to their weight, in the order they are met; a
    trailing " i/M" counts within one stage ("Editing image 2/3" is two thirds into "Editing image"). A stage
    not in `weights`, or met again, gets no slice of its own. The reported fraction never goes back."""

    def __init__(self, inner: JobContext, weights: dict[str, float]) -> None:
        super().__init__(on_progress=inner._on_progress, on_partial=inner.partial, cancel=inner.cancel_token,
                         span=inner._span)
        self._weights = {k: float(v) for k, v in weights.items() if v > 0}
        self._total = sum(self._weights.values()) or 1.0
        self._seen: set[str] = set()
        self._stage: str | None = None
        self._done_before = 0.0  # fraction of the span taken by the stages already finished
        self._slice = 0.0
        self._last = 0.0

    def progress(self, stage: str, done: int, total: int | None = None, message: str = "",
                 rate: float | None = None) -> None:
        m = _COUNTED_STAGE.match(stage)
        key, part, parts = (m.group(1), int(m.group(2)), int(m.group(3))) if m else (stage, 1, 1)
        if key != self._stage:
            self._done_before = min(1.0, self._done_before + self._slice)
            self._slice = 0.0 if key in self._seen else self._weights.get(key, 0.0) / self._total
            self._seen.add(key)
            self._stage = key
        within = min(1.0, max(0.0, done / total)) if total else 0.0
        if parts > 0:
            within = min(1.0, (max(0, part - 1) + within) / parts)
        self._last = max(self._last, min(1.0, self._done_before + self._slice * within))
        start, end = self._span
        p = Progress(stage, done, total, message, rate, start + (end - start) * self._last)
        self.last_progress = p
        if self._on_progress is not None:
            self._on_progress(p)


def null_context() -> JobContext:
    """A context that reports nowhere and is never cancelled (for library calls from Python)."""
    return JobContext()


@dataclass
class JobOutcome:
    """How a job ended: exactly one of result / error is meaningful unless it was cancelled."""

    status: str  # "done" | "cancelled" | "failed"
    result: Any = None
    error: dict | None = None  # NemoError.to_dict() plus traceback in "detail"
    partial_results: list[Any] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "done"


def describe_exception(exc: BaseException) -> dict:
    """User-facing message + technical detail for any exception (no secrets are added here)."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, NemoError):
        d = exc.to_dict()
        d["detail"] = (exc.detail + "\n\n" if exc.detail else "") + tb
        return d
    # lazy: no torch import for plain jobs
    from nemo_desktop.core.base.device import translate_cuda_error, translate_oom

    known = translate_oom(exc) or translate_cuda_error(exc)
    if known is not None:
        d = known.to_dict()
        d["detail"] = tb
        return d
    return {
        "type": type(exc).__name__,
        "message": f"Unexpected error: {exc}",
        "hint": "This is probably a bug in NEMO Desktop. The details below help to report it.",
        "detail": tb,
    }


def run_job(fn: Callable[[JobContext], T], ctx: JobContext | None = None) -> JobOutcome:
    """Run `fn(ctx)` and never raise: the outcome says done / cancelled / failed."""
    ctx = ctx or JobContext()
    start = time.perf_counter()
    try:
        with cancel_scope(ctx.cancel_token):
            result = fn(ctx)
        status, error = "done", None
    except JobCancelled as exc:
        result, status, error = None, "cancelled", exc.to_dict()
    except Exception as exc:  # noqa: BLE001 - the whole point is to catch and describe everything
        result, status, error = None, "failed", describe_exception(exc)
    return JobOutcome(status, result, error, list(ctx.partial_results), time.perf_counter() - start)
