"""The one dialog for every failure: what happened, what to do, and copyable technical details.

Errors arrive as the core's error dict (`NemoError.to_dict()` / `describe_exception()`: type, message,
hint, detail) or as an exception. The dialog opens without blocking (`open()`), so a failure reported
from a job never stalls the event loop and tests never hang on a modal `exec()`.
"""
from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton,
                               QSizePolicy, QStyle, QToolButton, QVBoxLayout, QWidget)

log = logging.getLogger(__name__)


def error_dict(error: dict | BaseException | str) -> dict:
    """Normalise what a caller has (core error dict, exception, plain text) to the error dict shape."""
    if isinstance(error, BaseException):
        from nemo_desktop.core.base.job_context import describe_exception

        return describe_exception(error)
    if isinstance(error, str):
        return {"type": "Error", "message": error, "hint": None, "detail": None}
    return dict(error)


class ErrorDialog(QDialog):
    def __init__(self, error: dict | BaseException | str, parent: QWidget | None = None,
                 title: str = "NEMO Desktop: something went wrong"):
        super().__init__(parent)
        self.error: dict[str, Any] = error_dict(error)
        self.setWindowTitle(title)
        self.setObjectName("errorDialog")
        self.setMinimumWidth(480)

        message = self.error.get("message") or "An error occurred, but it came without a description."
        hint = self.error.get("hint") or ""
        detail = self.error.get("detail") or ""

        icon = QLabel()
        size = self.style().pixelMetric(QStyle.PixelMetric.PM_MessageBoxIconSize)
        icon.setPixmap(self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxCritical).pixmap(size))
        icon.setAlignment(Qt.AlignmentFlag.AlignTop)

        self.message_label = QLabel(message)
        self.message_label.setObjectName("errorMessage")
        self.message_label.setWordWrap(True)
        self.message_label.setTextFormat(Qt.TextFormat.PlainText)
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = self.message_label.font()
        font.setBold(True)
        self.message_label.setFont(font)

        self.hint_label = QLabel(hint)
        self.hint_label.setObjectName("errorHint")
        self.hint_label.setWordWrap(True)
        self.hint_label.setTextFormat(Qt.TextFormat.PlainText)
        self.hint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hint_label.setVisible(bool(hint))

        self.details_button = QToolButton()
        self.details_button.setText("Show details")
        self.details_button.setCheckable(True)
        self.details_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.details_button.setArrowType(Qt.ArrowType.RightArrow)
        self.details_button.setEnabled(bool(detail))
        self.details_button.toggled.connect(self._toggle_details)

        self.details = QPlainTextEdit(detail)
        self.details.setObjectName("errorDetails")
        self.details.setReadOnly(True)
        self.details.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.details.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.details.setMinimumHeight(180)
        self.details.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.details.setVisible(False)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy details")
        self.copy_button.setToolTip("Copy the message, the hint and the technical details to the clipboard")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy_to_clipboard)
        buttons.rejected.connect(self.reject)

        text = QVBoxLayout()
        text.addWidget(self.message_label)
        text.addWidget(self.hint_label)
        head = QHBoxLayout()
        head.addWidget(icon)
        head.addLayout(text, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(head)
        layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.details, 1)
        layout.addWidget(buttons)

    def report_text(self) -> str:
        """Everything a bug report needs, in plain text (no secrets are ever put into error fields)."""
        parts = [f"{self.error.get('type') or 'Error'}: {self.error.get('message') or ''}"]
        if self.error.get("hint"):
            parts.append(f"Hint: {self.error['hint']}")
        if self.error.get("detail"):
            parts.append(self.error["detail"])
        return "\n\n".join(parts)

    def copy_to_clipboard(self) -> None:
        QGuiApplication.clipboard().setText(self.report_text())

    def _toggle_details(self, shown: bool) -> None:
        self.details.setVisible(shown)
        self.details_button.setText("Hide details" if shown else "Show details")
        self.details_button.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.adjustSize()


def show_error(error: dict | BaseException | str, parent: QWidget | None = None,
               title: str = "NEMO Desktop: something went wrong") -> ErrorDialog:
    """Log the error and show it without blocking; returns the open dialog (deleted when closed)."""
    dialog = ErrorDialog(error, parent, title)
    log.error("shown to the user: %s", dialog.report_text())
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog
