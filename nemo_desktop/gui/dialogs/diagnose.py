"""Diagnosis dialog opened by dropping images (or File ▸ Diagnose image…).

For now it lists the images and says what the diagnosis needs; the prediction, top-5, the true-label
completer and the SciTX run come with the model layer and SciTX. It never shows an invented result.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QListWidget, QPushButton, QVBoxLayout, QWidget

from ..drops import describe_rejected

NOT_READY = ("Diagnosing needs a classifier, a captioning model and an image editor set up in the Model "
             "manager. This build cannot run a diagnosis yet.")


class DiagnoseDialog(QDialog):
    sig_open_model_manager = Signal()

    def __init__(self, images: list[Path], rejected: list[tuple[str, str]] | None = None,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.images = list(images)
        self.setObjectName("diagnoseDialog")
        n = len(self.images)
        self.setWindowTitle(f"Diagnose {n} image{'s' if n != 1 else ''}")
        self.setMinimumWidth(520)

        self.file_list = QListWidget()
        self.file_list.setObjectName("diagnoseFiles")
        for path in self.images:
            self.file_list.addItem(path.name)
            self.file_list.item(self.file_list.count() - 1).setToolTip(str(path))

        self.skipped_label = QLabel()
        self.skipped_label.setObjectName("diagnoseSkipped")
        self.skipped_label.setWordWrap(True)
        self.skipped_label.setTextFormat(Qt.TextFormat.PlainText)
        if rejected:
            self.skipped_label.setText("Skipped:\n" + describe_rejected(rejected))
        self.skipped_label.setVisible(bool(rejected))

        self.status_label = QLabel(NOT_READY)
        self.status_label.setObjectName("diagnoseStatus")
        self.status_label.setWordWrap(True)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        models = QPushButton("Open Model manager")
        buttons.addButton(models, QDialogButtonBox.ButtonRole.ActionRole)
        models.clicked.connect(self.sig_open_model_manager)
        models.clicked.connect(self.accept)
        buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Images to diagnose:"))
        layout.addWidget(self.file_list, 1)
        layout.addWidget(self.skipped_label)
        layout.addWidget(self.status_label)
        layout.addWidget(buttons)
