"""Progress bars and Ctrl-C handling shared by the long-running commands (explain, global, index, bench; the
bar of models download too).

    with cancellable_job(StageBars()) as ctx:
        result = method(image, label, ctx)       # raises JobCancelled after the first Ctrl-C

A display is a JobContext progress callback with a `close()`; `cancellable_job` closes it on the way out, so
that a cancelled command prints its message below a finished bar. Commands with their own display subclass
`StageBars` (override `_open` for the bar's look, `__call__` for what is drawn).
"""
from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Container, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol


class Display(Protocol):
    def __call__(self, progress: Any) -> None: ...

    def close(self) -> None: ...


def progress_disabled() -> bool:
    """TQDM_DISABLE set (to anything but 0/false/no/off): no progress output at all, bars or lines."""
    return os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("", "0", "false", "no", "off")


class StageBars:
    """A JobContext progress callback: one tqdm bar per stage on stderr when stderr is a terminal.

    kept: stages whose bar stays on screen once the next stage starts; units: a stage's unit ("it" otherwise);
    terminal_only: when stderr is not a terminal (logs, pipes), nothing at all; otherwise plain lines there
    instead of a redrawn bar (a stage's start, its progress at most every `LINE_EVERY_S` seconds, its end).
    TQDM_DISABLE turns every form off.
    """

    LINE_EVERY_S = 30.0

    def __init__(self, *, kept: Container[str] = (), units: Mapping[str, str] | None = None,
                 terminal_only: bool = False) -> None:
        self.kept = kept
        self.units = dict(units or {})
        self.terminal_only = terminal_only
        self._bar: Any = None
        self._stage: str | None = None
        self._line_at = 0.0
        self._line_done: int | None = None

    def mode(self) -> str:
        """'bar' (stderr is a terminal), 'lines' (a log or a pipe) or 'off' (TQDM_DISABLE, or terminal_only)."""
        if progress_disabled():
            return "off"
        if _stderr_is_terminal():
            return "bar"
        return "off" if self.terminal_only else "lines"

    def __call__(self, p: Any) -> None:
        mode = self.mode()
        if mode == "off":
            return
        if mode == "lines":
            self._line(p)
            return
        if p.stage != self._stage:
            self.close()
            self._stage = p.stage
            self._bar = self._open(p)
        bar = self._bar
        if p.total is not None and bar.total != p.total:
            bar.total = p.total
        bar.update(max(0, p.done - bar.n))  # never backwards: a finished step may report 1/1 after n/n

    def _line(self, p: Any) -> None:
        now = time.monotonic()
        unit = self.units.get(p.stage, "")
        count = f"{p.done}/{p.total}" + (f" {unit}" if unit else "") if p.total else ""
        if p.stage != self._stage:
            self._stage, self._line_at, self._line_done = p.stage, now, p.done
            print(f"{p.stage}..." + (f" {count}" if count and p.done else ""), file=sys.stderr)
        elif p.total and p.done >= p.total and self._line_done != p.done:
            self._line_at, self._line_done = now, p.done
            print(f"{p.stage}: {count} done", file=sys.stderr)
        elif count and now - self._line_at >= self.LINE_EVERY_S and self._line_done != p.done:
            self._line_at, self._line_done = now, p.done
            print(f"{p.stage}: {count}", file=sys.stderr)

    def _open(self, p: Any) -> Any:
        from tqdm import tqdm

        return tqdm(total=p.total, desc=p.stage, unit=self.units.get(p.stage, "it"), file=sys.stderr,
                    dynamic_ncols=True, leave=p.stage in self.kept)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._stage = None


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


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
    from ..core.base.job_context import CancelToken, JobContext, cancel_scope

    token = CancelToken()
    try:
        with ctrl_c_cancels(token, cancels_after), cancel_scope(token):  # also interrupts a request in flight
            yield JobContext(display, cancel=token)
    finally:
        display.close()
