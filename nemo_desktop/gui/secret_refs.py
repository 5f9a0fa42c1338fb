"""What the settings keep instead of a key: a reference (env:NAME or keyring:SERVICE/USER). Qt-free.

A key the user pastes goes straight into the OS keyring (when the `keyring` package and a backend are
there) and only its reference is kept; without a keyring the key is refused with a message that says to
use an environment variable. Keys are never echoed in messages, logs or widgets.
"""
from __future__ import annotations

import re

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.secrets import SECRET_PATTERNS, register_secret

KEYRING_SERVICE = "nemo-desktop"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEYRING_REF = re.compile(r"^keyring:[^/\s]+/\S+$")

USE_ENV_HINT = ("Put the key in an environment variable before starting NEMO Desktop (for example "
                "`export OPENAI_API_KEY=...` in your shell profile) and enter its name here, e.g. "
                "env:OPENAI_API_KEY.")


def normalise_reference(text: str | None) -> str | None:
    """'' -> None; 'NAME' or 'env:NAME' -> 'env:NAME'; 'keyring:S/U' kept. Anything else (a key pasted into
    the reference field, say) raises ConfigError without repeating it."""
    text = (text or "").strip()
    if not text:
        return None
    if any(p.search(text) for p in SECRET_PATTERNS):
        raise ConfigError("That looks like a key, not a reference to one.",
                          hint="Paste keys into the key field (they go to the OS keyring), or " + USE_ENV_HINT)
    if text.startswith("env:") and _ENV_NAME.match(text[4:]):
        return text
    if _ENV_NAME.match(text):
        return f"env:{text}"
    if _KEYRING_REF.match(text):
        return text
    raise ConfigError("The reference must be env:VARIABLE_NAME or keyring:SERVICE/USER.",
                      hint="Do not paste the key itself here. " + USE_ENV_HINT)


def settings_value(ref: str | None) -> str | None:
    """The form the core settings store (a bare variable NAME for env refs, as their schema documents)."""
    if ref and ref.startswith("env:"):
        return ref[4:]
    return ref


def keyring_available() -> bool:
    try:
        import keyring  # noqa: F401
    except ImportError:
        return False
    return True


def store_in_keyring(secret: str, user: str, service: str = KEYRING_SERVICE) -> str:
    """Store `secret` in the OS keyring; returns its reference 'keyring:SERVICE/USER'."""
    secret = (secret or "").strip()
    if not secret:
        raise ConfigError("No key was entered.")
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:
        raise ConfigError("The key was not stored: no OS keyring is available to NEMO Desktop (the Python "
                          "package 'keyring' is not installed), and NEMO Desktop never writes keys into its "
                          "settings.", hint=USE_ENV_HINT + " Or install the keyring support: "
                                                           "pip install 'nemo-desktop[keyring]'.") from None
    try:
        keyring.set_password(service, user, secret)
    except (KeyringError, RuntimeError, OSError) as exc:
        raise ConfigError(f"The OS keyring refused the key ({type(exc).__name__}).",
                          hint="Unlock or set up the keyring, or " + USE_ENV_HINT[0].lower() + USE_ENV_HINT[1:]
                          ) from None
    register_secret(secret)  # from now on redacted wherever it might appear
    return f"keyring:{service}/{user}"
