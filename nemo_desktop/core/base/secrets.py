"""Secrets never reach a log or an error message: `redact` and `SecretsFilter` remove every secret value
resolved so far (remembered in memory only, `register_secret`) and well-known token shapes (hf_..., sk-...,
Bearer ...) from any text or log record. Where a secret comes from (a reference such as "env:OPENAI_API_KEY")
is `secret_refs.py`; this module sits below the errors, which redact their text through it.
"""
from __future__ import annotations

import logging
import re
import threading
import traceback
from typing import Iterable

REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 6  # shorter values would redact ordinary words

# Token shapes that must never reach a log even when they were not resolved through this module.
SECRET_PATTERNS = (
    re.compile(r"hf_[A-Za-z0-9]{20,}"),
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|authorization|password)\"?\s*[=:]\s*\"?'?)[^\s'\",}]{8,}"),
)

_known: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a secret value so that redaction removes it wherever it appears."""
    if value and len(value) >= _MIN_SECRET_LEN:
        with _lock:
            _known.add(value)


def known_secrets() -> frozenset[str]:
    with _lock:
        return frozenset(_known)


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with the given secrets, every registered secret and known token shapes replaced."""
    if not text:
        return text
    values = set(known_secrets())
    values.update(s for s in (secrets or ()) if s and len(s) >= _MIN_SECRET_LEN)
    for value in sorted(values, key=len, reverse=True):  # longest first: one key may contain another
        text = text.replace(value, REDACTED)
    for pat in SECRET_PATTERNS:
        text = pat.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


class SecretsFilter(logging.Filter):
    """Removes secrets from a record's message, arguments and exception text.

    A filter on a logger only sees records created on that very logger, so install it on the handlers
    (`install_secrets_filter` does both) to cover records propagated from child loggers.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not break logging
            msg = str(record.msg)
        clean = redact(msg)
        if clean != msg or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install_secrets_filter(logger: logging.Logger | None = None) -> SecretsFilter:
    """Attach one SecretsFilter to `logger` (default: root) and to each of its current handlers."""
    logger = logger or logging.getLogger()
    flt = next((f for f in logger.filters if isinstance(f, SecretsFilter)), None) or SecretsFilter()
    for target in (logger, *logger.handlers):
        if not any(isinstance(f, SecretsFilter) for f in target.filters):
            target.addFilter(flt)
    return flt
