"""Progress bars and Ctrl-C handling shared by the long-running commands (explain, global, index, bench; the
bar of models download too).

    with cancellable_job(StageBars()) as ctx:
        result = method(image, label, ctx)       # raises JobCancelled after the first Ctrl-C

A display is a JobContext progress callback with a `close()`; `cancellable_job` closes it on the way out, so
that a cancelled command prints its message below a finished bar. Commands with their own display subclass
`StageBars` (override `_open` for the bar's look, `__call__` for what is drawn).
"""
from __future__ import annotations

import signal
import sys
from collections.abc import Container, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol


class Display(Protocol):
    def __call__(self, progress: Any) -> None: ...

    def close(self) -> None: ...


class StageBars:
    """A JobContext progress callback: one tqdm bar per stage on stderr.

    kept: stages whose bar stays on screen once the next stage starts; units: a stage's unit ("it" otherwise);
    terminal_only: no bar at all when stderr is not a terminal (logs, pipes).
    """

    def __init__(self, *, kept: Container[str] = (), units: Mapping[str, str] | None = None,
                 terminal_only: bool = False) -> None:
        self.kept = kept
        self.units = dict(units or {})
        self.terminal_only = terminal_only
        self._bar: Any = None
        self._stage: str | None = None

    def __call__(self, p: Any) -> None:
        if p.stage != self._stage:
            self.close()
            self._stage = p.stage
            self._bar = self._open(p)
        bar = self._bar
        if p.total is not None and bar.total != p.total:
            bar.total = p.total
        bar.update(max(0, p.done - bar.n))  # never backwards: a finished step may report 1/1 after n/n

    def _open(self, p: Any) -> Any:
        from tqdm import tqdm

        return tqdm(total=p.total, desc=p.stage, unit=self.units.get(p.stage, "it"), file=sys.stderr,
                    dynamic_ncols=True, leave=p.stage in self.kept, disable=None if self.terminal_only else False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


@contextmanager
def ctrl_c_cancels(token: Any, cancels_after: str = "the current step") -> Iterator[None]:
    """The first Ctrl-C cancels `token` (the job stops cleanly at its next check); the second interrupts at
    once (KeyboardInterrupt)."""
    def handler(signum, frame):
        if token.cancelled:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        token.cancel()
        print(f"\nCancelling after {cancels_after} (Ctrl-C again to stop now)...", file=sys.stderr)

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: no signal handling, cancellation comes from elsewhere
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def cancellable_job(display: Display, cancels_after: str = "the current step") -> Iterator[Any]:
    """A JobContext reporting to `display`, cancelled by the first Ctrl-C (see `ctrl_c_cancels`); the display
    is closed when the block ends, however it ends."""
    from ..core.jobs import CancelToken, JobContext, cancel_scope

    token = CancelToken()
    try:
        with ctrl_c_cancels(token, cancels_after), cancel_scope(token):  # also interrupts a request in flight
            yield JobContext(display, cancel=token)
    finally:
        display.close()
