"""Refuse to start on a Qt binding that corrupts Python's reference counts.

PySide6 6.12.0 on Python 3.11 drops one reference to `True` on every `Signal.emit()` and one reference
to `None` each time a Python item model returns None to Qt: objects that are immortal only from Python
3.12 on. A few thousand progress signals or one scroll through a large grid then abort the interpreter
("deallocating True or False"). PySide6 6.11 is not affected. The probe costs well under a millisecond.
"""
from __future__ import annotations

import sys

from nemo_desktop.core.base.errors import ConfigError

_PROBE_EMITS = 64


def binding_corrupts_refcounts() -> bool:
    """True when emitting a signal loses references to True (the PySide6 6.12.0 / Python 3.11 bug)."""
    if sys.version_info >= (3, 12):  # True, False and None are immortal there: the bug cannot hurt
        return False
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        sig = Signal()

    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(_PROBE_EMITS):
        probe.sig.emit()
    lost = before - sys.getrefcount(True)
    if lost > 0:  # give the references back so the probe itself does no harm
        import ctypes

        for _ in range(lost):
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))
    return lost >= _PROBE_EMITS // 2


def check_qt_binding() -> None:
    """Raise ConfigError (message + what to do) on a binding known to crash the application."""
    if binding_corrupts_refcounts():
        import PySide6

        raise ConfigError(
            f"The installed Qt binding (PySide6 {PySide6.__version__}) corrupts Python {sys.version.split()[0]}'s "
            "reference counts and would crash NEMO Desktop after a few thousand updates.",
            hint="Install another version: pip install 'PySide6-Essentials>=6.7,<6.12' (or use Python 3.12+).")
