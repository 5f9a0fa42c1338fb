"""The label that says in place why an action (Run) is not available: a missing input, a model not on disk."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel


def problem_label(name: str) -> QLabel:
    """Hidden until there is a problem to show; selectable, so that a path or a command in it can be copied."""
    label = QLabel("")
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setStyleSheet("color: #a15c00;")
    label.hide()
    return label
