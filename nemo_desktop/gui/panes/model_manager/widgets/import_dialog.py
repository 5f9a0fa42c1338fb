"""Dialog: import a fine-tuned timm classifier (architecture + weights file + class-name file + preprocessing).

Preprocessing comes from a config.json beside the weights when there is one (the fields then show it, locked);
otherwise the user sets input size, normalisation and interpolation. Import validates first and keeps the
dialog open with the reason when something is wrong (nothing typed is lost)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFileDialog,
                               QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout,
                               QWidget)

from nemo_desktop.core.base.errors import NemoError

from ....widgets.wheel_guard import GuardedComboBox, GuardedDoubleSpinBox, GuardedSpinBox

from ..custom_import import (CHECKPOINT_SUFFIXES, INTERPOLATIONS, NORMALISATIONS, CheckpointImport, Preprocessing,
                             checkpoint_config, entry_dict)


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
        self.weights_edit.textChanged.connect(self._read_checkpoint_config)
        for edit in (self.name_edit, self.arch_edit, self.weights_edit, self.classes_edit):
            # After the turn: the weights' own handlers (config.json, the suggested name) have run by then.
            edit.textChanged.connect(lambda _t: QTimer.singleShot(0, self, self._recheck))

        # Preprocessing: what the weights were trained with (wrong values make a good model look broken).
        self.size_spin = GuardedSpinBox()  # guarded: the wheel scrolls the dialog, not the setting
        self.size_spin.setRange(8, 4096)
        self.size_spin.setValue(224)
        self.size_spin.setSuffix(" px")
        self.norm_combo = GuardedComboBox()
        self.norm_combo.addItems(list(NORMALISATIONS))
        self.interp_combo = GuardedComboBox()
        self.interp_combo.addItems(list(INTERPOLATIONS))
        self.crop_spin = GuardedDoubleSpinBox()
        self.crop_spin.setRange(0.1, 1.0)
        self.crop_spin.setSingleStep(0.025)
        self.crop_spin.setDecimals(3)
        self.crop_spin.setValue(1.0)
        self.crop_spin.setToolTip("Centre-crop fraction of the eval transform (1 = resize only; ImageNet "
                                  "recipes often use 0.875).")
        self._from_config: Preprocessing | None = None
        self.preprocessing_note = QLabel()
        self.preprocessing_note.setObjectName("preprocessingNote")
        self.preprocessing_note.setWordWrap(True)

        form = QFormLayout()
        form.addRow("Name:", self.name_edit)
        form.addRow("timm architecture:", self.arch_edit)
        form.addRow("Weights:", _file_row(self.weights_edit, self._browse_weights))
        form.addRow("Class names:", _file_row(self.classes_edit, self._browse_classes))
        form.addRow("Input size:", self.size_spin)
        form.addRow("Normalisation:", self.norm_combo)
        form.addRow("Interpolation:", self.interp_combo)
        form.addRow("Crop fraction:", self.crop_spin)
        note = QLabel(".safetensors is preferred; a .pth/.pt file must be a plain state dict (it is read with "
                      "weights_only=True, never as pickled code).")
        note.setWordWrap(True)
        note.setEnabled(False)
        self.error_label = QLabel()
        self.error_label.setObjectName("importError")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c62828")
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Import")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.preprocessing_note)
        layout.addWidget(note)
        layout.addWidget(self.load_check)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        self._read_checkpoint_config("")

    def _suggest_name(self, text: str) -> None:
        if not self.name_edit.isModified() and text:
            self.name_edit.setText(Path(text).stem.replace(" ", "-")[:64])

    def _read_checkpoint_config(self, text: str) -> None:
        """Fill (and lock) the preprocessing from a config.json beside the weights, or unlock the fields."""
        pre, arch = None, None
        if text.strip():
            try:
                pre, arch = checkpoint_config(Path(text.strip()))
            except NemoError as exc:
                self.preprocessing_note.setText(f"{exc.message} Set the preprocessing below.")
        self._from_config = pre
        for w in (self.size_spin, self.norm_combo, self.interp_combo, self.crop_spin):
            w.setEnabled(pre is None)
        if arch and not self.arch_edit.text().strip():
            self.arch_edit.setText(arch)
        if pre is not None:
            self.size_spin.setValue(pre.input_size[0])
            name = next((n for n, (m, s) in NORMALISATIONS.items()
                         if _close(m, pre.mean) and _close(s, pre.std)), None)
            if name is None:
                name = "From config.json"
                if self.norm_combo.findText(name) < 0:
                    self.norm_combo.addItem(name)
            self.norm_combo.setCurrentText(name)
            self.interp_combo.setCurrentText(pre.interpolation)
            self.crop_spin.setValue(pre.crop_pct)
            self.preprocessing_note.setText(f"Preprocessing from the checkpoint's config.json: {pre.describe()}.")
        elif not text.strip() or not self.preprocessing_note.text().endswith("below."):
            self.preprocessing_note.setText("No config.json beside the weights: set the input size, normalisation "
                                            "and interpolation the weights were trained with (the defaults are "
                                            "ImageNet's; wrong values make a good model predict one class).")

    def _browse_weights(self) -> None:
        patterns = " ".join(f"*{s}" for s in CHECKPOINT_SUFFIXES)
        path, _ = QFileDialog.getOpenFileName(self, "Weights file", "", f"Weights ({patterns});;All files (*)")
        if path:
            self.weights_edit.setText(path)

    def _browse_classes(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Class-name file", "", "Text (*.txt *.json *.csv);;All files (*)")
        if path:
            self.classes_edit.setText(path)

    def preprocessing(self) -> Preprocessing:
        if self._from_config is not None:
            return self._from_config
        mean, std = NORMALISATIONS[self.norm_combo.currentText()]
        side = self.size_spin.value()
        return Preprocessing((side, side), mean, std, self.interp_combo.currentText(),
                             round(self.crop_spin.value(), 3))

    def request(self) -> CheckpointImport:
        return CheckpointImport(model_id=self.name_edit.text().strip(), architecture=self.arch_edit.text().strip(),
                                weights=Path(self.weights_edit.text().strip()),
                                class_file=Path(self.classes_edit.text().strip()),
                                preprocessing=self.preprocessing())

    def _recheck(self) -> None:
        """A problem said after OK is checked again as the fields change: it goes once it is fixed (or says the
        next one), instead of staying beside a name that is now fine."""
        if self.error_label.isHidden():
            return
        try:
            entry_dict(self.request())
        except NemoError as exc:
            self.error_label.setText(exc.message + (f" {exc.hint}" if exc.hint else ""))
            return
        self.error_label.setText("")
        self.error_label.hide()

    def accept(self) -> None:
        """Validate first: on a problem, say it here and keep the dialog (and what was typed) open."""
        try:
            entry_dict(self.request())
        except NemoError as exc:
            self.error_label.setText(exc.message + (f" {exc.hint}" if exc.hint else ""))
            self.error_label.show()
            return
        self.error_label.hide()
        super().accept()

    @property
    def load_after(self) -> bool:
        return self.load_check.isChecked()


def _close(a, b) -> bool:
    return len(a) == len(b) and all(abs(float(x) - float(y)) < 1e-4 for x, y in zip(a, b))
