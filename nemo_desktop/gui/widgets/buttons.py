"""A push button with its object name (for tests and style), tooltip and action, in one call."""
from __future__ import annotations

from typing import Callable

from PySide6.QtWidgets import QPushButton


def action_button(text: str, action: Callable[[], object], tip: str, name: str) -> QPushButton:
    """`action()` runs on each click, called without Qt's `checked` argument (actions with optional parameters
    would otherwise receive it as their first one)."""
    button = QPushButton(text)
    button.setObjectName(name)
    button.setToolTip(tip)
    button.clicked.connect(lambda _checked=False: action())
    return button
