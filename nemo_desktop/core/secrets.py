"""API keys and tokens: resolved from a reference, never stored in settings, never logged.

A reference names where the secret lives, not the secret itself:
    "env:OPENAI_API_KEY"          an environment variable
    "keyring:nemo-desktop/openai" the OS keyring (service "nemo-desktop", user "openai"; needs `keyring`)
Every resolved value is remembered (in memory only) so that `redact` and `SecretsFilter` can remove it
from any text or log record, in addition to well-known token shapes (hf_..., sk-..., Bearer ...).
"""
from __future__ import annotations

import logging
import os
import re
import threading
import traceback
from typing import Iterable

from .errors import ConfigError

REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 6  # shorter values would redact ordinary words

# Token shapes that must never reach a log even when they were not resolved through this module.
SECRET_PATTERNS = (
    re.compile(r"hf_[A-Za-z0-9]{20,}"),
    re.compile(r"sk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|authorization|password)\"?\s*[=:]\s*\"?'?)[^\s'\",}]{8,}"),
)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_known: set[str] = set()
_lock = threading.Lock()


# Keys of a config mapping whose values must be references to secrets, never the secrets themselves.
SECRET_FIELD_NAMES = frozenset({"api_key", "apikey", "key", "token", "secret", "password", "api_key_ref",
                                "token_ref"})
# env:NAME, keyring:SERVICE/USER, or a bare variable NAME (meaning env:NAME).
_SECRET_REF_RE = re.compile(r"^((env:)?[A-Za-z_][A-Za-z0-9_]*|keyring:[^/\s]+/[^\s]+)$")


def is_secret_reference(value: object) -> bool:
    """True for a reference such as 'env:OPENAI_API_KEY' or 'keyring:nemo/openai'; False for anything that
    could be the secret itself (including a token shape that happens to match the reference syntax)."""
    return (isinstance(value, str) and bool(_SECRET_REF_RE.match(value))
            and not any(p.search(value) for p in SECRET_PATTERNS))


def find_inline_secrets(data: object, path: str = "") -> list[str]:
    """Where (dotted paths) a nested config holds a secret-named field whose value is not a reference."""
    found: list[str] = []
    if isinstance(data, dict):
        for k, v in data.items():
            where = f"{path}.{k}" if path else str(k)
            if str(k).lower() in SECRET_FIELD_NAMES and v is not None and not is_secret_reference(v):
                found.append(where)
            else:
                found.extend(find_inline_secrets(v, where))
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            found.extend(find_inline_secrets(v, f"{path}[{i}]"))
    return found


def register_secret(value: str | None) -> None:
    """Remember a secret value so that redaction removes it wherever it appears."""
    if value and len(value) >= _MIN_SECRET_LEN:
        with _lock:
            _known.add(value)


def known_secrets() -> frozenset[str]:
    with _lock:
        return frozenset(_known)


def resolve_secret(ref: str | None) -> str | None:
    """The secret a reference points to; None for no reference. Raises ConfigError, never echoing values."""
    if ref is None or not ref.strip():
        return None
    scheme, _, target = ref.strip().partition(":")
    scheme = scheme.lower()
    if scheme == "env" and _ENV_NAME.match(target):
        value = os.environ.get(target, "").strip()
        if not value:
            raise ConfigError(f"The environment variable {target} is not set (it should hold the API key).",
                              hint=f"Set it before starting NEMO Desktop, e.g. `export {target}=...`.")
    elif scheme == "keyring" and "/" in target:
        value = _from_keyring(*target.split("/", 1))
    else:
        # Never include `ref` itself: a user may have pasted the key where a reference belongs.
        raise ConfigError("The API key setting is not a valid reference.",
                          hint="Use 'env:VARIABLE_NAME' (an environment variable) or 'keyring:SERVICE/USER' "
                               "(the OS keyring); do not paste the key itself into the settings.")
    register_secret(value)
    return value


def describe_secret_ref(ref: str | None) -> str:
    """Where a reference points, for messages ('environment variable OPENAI_API_KEY'); never the value."""
    if not ref or not ref.strip():
        return "no API key configured"
    scheme, _, target = ref.strip().partition(":")
    if scheme.lower() == "env" and _ENV_NAME.match(target):
        return f"environment variable {target}"
    if scheme.lower() == "keyring" and "/" in target:
        service, user = target.split("/", 1)
        return f"OS keyring entry (service '{service}', user '{user}')"
    return "an invalid API key reference"


def _from_keyring(service: str, user: str) -> str:
    try:
        import keyring
    except ImportError:
        raise ConfigError("Reading API keys from the OS keyring needs the 'keyring' package, which is not "
                          "installed.",
                          hint="Install it with `pip install keyring` (or `pip install nemo-desktop[keyring]`), "
                               "or use an environment variable: 'env:VARIABLE_NAME'.") from None
    try:
        value = keyring.get_password(service, user)
    except Exception as exc:  # noqa: BLE001 - keyring backends raise their own types
        raise ConfigError(f"The OS keyring could not be read ({type(exc).__name__}).",
                          hint="Unlock the keyring, or use an environment variable: 'env:VARIABLE_NAME'.") from None
    if not value:
        raise ConfigError(f"The OS keyring has no entry for service '{service}', user '{user}'.",
                          hint=f"Store the key with `keyring set {service} {user}`.")
    return value


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
