"""Logging to a rotating file in the per-user log directory, with secrets filtered out of every record
(the patterns and known secret values live in `secrets.py`)."""
from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from .secrets import SecretsFilter
from .store.paths import AppPaths, ensure_writable_dir

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
        handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=5_000_000, backupCount=5,
                                                       encoding="utf-8")
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
