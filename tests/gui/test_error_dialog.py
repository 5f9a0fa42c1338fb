"""The error dialog shows message and hint, details on demand (read-only, copyable)."""
from __future__ import annotations

import pytest
from gui_job_functions import fail_to_load
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from nemo_desktop.core.base.errors import InputImageError
from nemo_desktop.gui.widgets.error_dialog import ErrorDialog, show_error

pytestmark = pytest.mark.gui


def test_failed_job_error_is_shown_with_expandable_copyable_details(qtbot, runner):
    handle = runner.submit(fail_to_load, title="Load model", report_errors=False)
    with qtbot.waitSignal(handle.sig_failed, timeout=5000) as failed:
        pass
    dialog = ErrorDialog(failed.args[0])
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.message_label.text() == "The classifier could not be loaded."
    assert dialog.hint_label.text() == "Check that the checkpoint file is complete."
    assert dialog.hint_label.isVisible()
    assert not dialog.details.isVisible()  # collapsed until asked for

    qtbot.mouseClick(dialog.details_button, Qt.MouseButton.LeftButton)
    assert dialog.details.isVisible() and dialog.details.isReadOnly()
    assert "header too short" in dialog.details.toPlainText()
    assert "Traceback" in dialog.details.toPlainText()

    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    copied = QGuiApplication.clipboard().text()
    assert copied.startswith("ModelError: The classifier could not be loaded.")
    assert "Hint: Check that the checkpoint file is complete." in copied and "header too short" in copied


def test_show_error_accepts_an_exception_and_does_not_block(qtbot):
    exc = InputImageError("'cat.png' is truncated.", hint="Get the file again.")
    dialog = show_error(exc)
    qtbot.addWidget(dialog)
    assert dialog.isVisible()  # open(), not exec(): we got here without anyone closing it
    assert dialog.message_label.text() == "'cat.png' is truncated."
    assert dialog.error["type"] == "InputImageError"


def test_an_error_without_hint_or_detail_still_says_something(qtbot):
    dialog = ErrorDialog({"message": None})
    qtbot.addWidget(dialog)
    assert dialog.message_label.text()  # never an empty dialog
    assert not dialog.hint_label.isVisibleTo(dialog)
    assert not dialog.details_button.isEnabled()
