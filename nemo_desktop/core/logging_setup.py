"""Logging to a rotating file in the per-user log directory, with secrets filtered out of every record."""
from __future__ import annotations

import logging
import logging.handlers
import re
from pathlib import Path

from .store.paths import AppPaths

FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"

# Token shapes that must never reach a log: Hugging Face tokens, OpenAI-style keys, bearer headers.
_SECRET_PATTERNS = [
    re.compile(r"hf_[A-Za-z0-9]{20,}"),
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|authorization)\s*[=:]\s*)['\"]?[^\s'\"]{8,}"),
]


def redact(text: str) -> str:
    for pat in _SECRET_PATTERNS:
        text = pat.sub(lambda m: (m.group(1) if m.groups() else "") + "[REDACTED]", text)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites the formatted message of every record so no token shape survives (args included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not kill logging
            return True
        clean = redact(msg)
        if record.exc_info and record.exc_info[1] is not None:
            # Exception text can hold a header or URL with a key: render it now, redacted.
            import traceback

            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)))
            record.exc_info = None
        if clean != msg or record.args:
            record.msg, record.args = clean, None
        return True


_installed: dict[str, logging.Handler] = {}


def setup_logging(paths: AppPaths, level: str = "INFO", stderr_level: str | None = None) -> Path:
    """Install (once per log file) a rotating file handler and the secret filter on the root logger."""
    paths.log_dir.mkdir(parents=True, exist_ok=True)
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
        handler.addFilter(RedactSecrets())
        root.addHandler(handler)
        _installed[key] = handler
    if stderr_level:
        if not any(getattr(h, "_nemo_stderr", False) for h in root.handlers):
            err = logging.StreamHandler()
            err._nemo_stderr = True  # type: ignore[attr-defined]
            err.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            err.addFilter(RedactSecrets())
            root.addHandler(err)
        for h in root.handlers:
            if getattr(h, "_nemo_stderr", False):
                h.setLevel(stderr_level)
    logging.captureWarnings(True)
    return log_file
