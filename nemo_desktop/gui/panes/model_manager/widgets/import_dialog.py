"""Dialog: import a fine-tuned timm classifier (architecture + weights file + class-name file)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QVBoxLayout, QWidget)

from ..custom_import import CHECKPOINT_SUFFIXES, CheckpointImport


def _file_row(edit: QLineEdit, browse) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(edit, 1)
    button = QPushButton("Browse…")
    button.clicked.connect(browse)
    layout.addWidget(button)
    return row


class ImportCheckpointDialog(QDialog):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("importCheckpointDialog")
        self.setWindowTitle("Import a classifier checkpoint")
        self.setMinimumWidth(560)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("my-resnet50")
        self.arch_edit = QLineEdit()
        self.arch_edit.setPlaceholderText("resnet50, vit_base_patch16_224, convnext_tiny, …")
        self.arch_edit.setToolTip("The timm architecture the weights were trained with (timm.list_models()).")
        self.weights_edit = QLineEdit()
        self.weights_edit.setPlaceholderText("/path/to/model.safetensors")
        self.classes_edit = QLineEdit()
        self.classes_edit.setPlaceholderText("/path/to/classes.txt (one class name per line, in output order)")
        self.load_check = QCheckBox("Load it as the current classifier")
        self.load_check.setChecked(True)
        self.weights_edit.textChanged.connect(self._suggest_name)

        form = QFormLayout()
        form.addRow("Name:", self.name_edit)
        form.addRow("timm architecture:", self.arch_edit)
        form.addRow("Weights:", _file_row(self.weights_edit, self._browse_weights))
        form.addRow("Class names:", _file_row(self.classes_edit, self._browse_classes))
        note = QLabel(".safetensors is preferred; a .pth/.pt file must be a plain state dict (it is read with "
                      "weights_only=True, never as pickled code).")
        note.setWordWrap(True)
        note.setEnabled(False)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Import")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.load_check)
        layout.addWidget(buttons)

    def _suggest_name(self, text: str) -> None:
        if not self.name_edit.isModified() and text:
            self.name_edit.setText(Path(text).stem.replace(" ", "-")[:64])

    def _browse_weights(self) -> None:
        patterns = " ".join(f"*{s}" for s in CHECKPOINT_SUFFIXES)
        path, _ = QFileDialog.getOpenFileName(self, "Weights file", "", f"Weights ({patterns});;All files (*)")
        if path:
            self.weights_edit.setText(path)

    def _browse_classes(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Class-name file", "", "Text (*.txt *.json *.csv);;All files (*)")
        if path:
            self.classes_edit.setText(path)

    def request(self) -> CheckpointImport:
        return CheckpointImport(model_id=self.name_edit.text().strip(), architecture=self.arch_edit.text().strip(),
                                weights=Path(self.weights_edit.text().strip()),
                                class_file=Path(self.classes_edit.text().strip()))

    @property
    def load_after(self) -> bool:
        return self.load_check.isChecked()

