"""An in-memory stand-in for the `keyring` package (a test double; the real package talks to the OS
keyring, which test machines do not have). Installed into sys.modules by the tests that need it."""
from __future__ import annotations

import types


class KeyringError(Exception):
    pass


def install(monkeypatch) -> dict:
    """Make `import keyring` give an in-memory keyring; returns its storage {(service, user): secret}."""
    storage: dict[tuple[str, str], str] = {}
    module = types.ModuleType("keyring")
    errors = types.ModuleType("keyring.errors")
    errors.KeyringError = KeyringError
    module.errors = errors
    module.set_password = lambda service, user, secret: storage.__setitem__((service, user), secret)
    module.get_password = lambda service, user: storage.get((service, user))
    monkeypatch.setitem(__import__("sys").modules, "keyring", module)
    monkeypatch.setitem(__import__("sys").modules, "keyring.errors", errors)
    return storage
