"""Logging to a rotating file in the per-user log directory, with secrets filtered out of every record
(the patterns and known secret values live in `secrets.py`).

A log file that cannot be written (a full disk, a folder removed or made read-only) never disturbs the work:
the first failure prints one warning on the console, then warnings and errors go to the console instead of
the file (logging's default would print a "--- Logging error ---" traceback for every record).
"""
from __future__ import annotations

import contextlib
import errno
import logging
import logging.handlers
import sys
from pathlib import Path

from nemo_desktop.core.base.secrets import SecretsFilter
from nemo_desktop.core.store.paths import AppPaths, ensure_writable_dir

FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at emit time (it may be replaced after set-up, e.g. by pytest)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class _LogFile(logging.handlers.RotatingFileHandler):
    """The rotating log file; after its first write failure it stops writing and hands records to the console."""

    failed: BaseException | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.failed is None:
            super().emit(record)  # failures land in handleError
        elif record.levelno >= logging.WARNING and not _has_console(logging.getLogger()):
            _console_fallback().handle(record)

    def handleError(self, record: logging.LogRecord) -> None:
        if self.failed is not None:
            return
        self.failed = sys.exc_info()[1] or OSError("unknown error")
        why = "the disk is full" if getattr(self.failed, "errno", None) == errno.ENOSPC else str(self.failed)
        try:
            sys.stderr.write(f"warning: cannot write the log file {self.baseFilename} ({why}); warnings and errors "
                             "go to the console from now on.\n")
        except Exception:  # noqa: BLE001 - no console either: nothing more can be done, quietly
            pass
        with contextlib.suppress(Exception):
            self.stream and self.stream.close()  # a half-written buffer would fail again on every flush
        self.stream = None
        self.emit(record)  # the record that failed goes to the console too


def _has_console(root: logging.Logger) -> bool:
    return any(getattr(h, "_nemo_stderr", False) for h in root.handlers)


_fallback: logging.Handler | None = None


def _console_fallback() -> logging.Handler:
    global _fallback
    if _fallback is None:
        _fallback = _CurrentStderr()
        _fallback.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        _fallback.addFilter(SecretsFilter())
    return _fallback


_installed: dict[str, logging.Handler] = {}


def setup_logging(paths: AppPaths, level: str = "INFO", stderr_level: str | None = None) -> Path:
    """Install (once per log file) a rotating file handler and the secret filter on the root logger."""
    ensure_writable_dir(paths.log_dir)
    log_file = paths.log_file
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    key = str(log_file)
    if key not in _installed:
        for old in list(_installed.values()):
            root.removeHandler(old)
            old.close()
        _installed.clear()
        handler = _LogFile(log_file, maxBytes=5_000_000, backupCount=5, encoding="utf-8")
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.setLevel(level)
        handler.addFilter(SecretsFilter())
        root.addHandler(handler)
        _installed[key] = handler
    if stderr_level:
        if not any(getattr(h, "_nemo_stderr", False) for h in root.handlers):
            err = _CurrentStderr()
            err._nemo_stderr = True  # type: ignore[attr-defined]
            err.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            err.addFilter(SecretsFilter())
            root.addHandler(err)
        for h in root.handlers:
            if getattr(h, "_nemo_stderr", False):
                h.setLevel(stderr_level)
    logging.captureWarnings(True)
    return log_file
