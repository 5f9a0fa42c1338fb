"""API keys and tokens: resolved from a reference, never stored in settings, never logged.

A reference names where the secret lives, not the secret itself:
    "env:OPENAI_API_KEY"          an environment variable
    "keyring:nemo-desktop/openai" the OS keyring (service "nemo-desktop", user "openai"; needs `keyring`)
Every resolved value is registered (`secrets.register_secret`, in memory only) so that `redact` and
`SecretsFilter` can remove it from any text or log record.
"""
from __future__ import annotations

import os
import re

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.secrets import SECRET_PATTERNS, register_secret

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

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
