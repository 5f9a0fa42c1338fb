"""Dialog: add or edit an OpenAI-compatible endpoint. The API key is a reference; a pasted key goes to the
OS keyring (by the caller, in a job) and this dialog never shows a stored key."""
from __future__ import annotations

from PySide6.QtWidgets import (QButtonGroup, QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QRadioButton,
                               QVBoxLayout, QWidget)

from nemo_desktop.core.base.errors import ConfigError

from ....secret_refs import normalise_reference

NO_KEY, REFERENCE, PASTE = "none", "reference", "paste"


class EndpointDialog(QDialog):
    def __init__(self, endpoint=None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("endpointDialog")
        self.setWindowTitle("Edit endpoint" if endpoint else "Add an OpenAI-compatible endpoint")
        self.setMinimumWidth(520)
        self.original_name = endpoint.name if endpoint else None
        self.name_edit = QLineEdit(endpoint.name if endpoint else "")
        self.name_edit.setPlaceholderText("local-vllm")
        self.url_edit = QLineEdit(endpoint.base_url if endpoint else "")
        self.url_edit.setPlaceholderText("http://localhost:8000/v1")
        self.model_edit = QLineEdit(endpoint.model if endpoint else "")
        self.model_edit.setPlaceholderText("Qwen/Qwen2.5-VL-7B-Instruct")

        self.no_key = QRadioButton("No API key (a local server)")
        self.use_ref = QRadioButton("Key from an environment variable or keyring entry:")
        self.use_paste = QRadioButton("Paste the key (stored in the OS keyring, never in the settings):")
        self.key_group = QButtonGroup(self)
        for b in (self.no_key, self.use_ref, self.use_paste):
            self.key_group.addButton(b)
        self.ref_edit = QLineEdit()
        self.ref_edit.setPlaceholderText("env:OPENAI_API_KEY")
        self.key_edit = QLineEdit()
        self.key_edit.setObjectName("endpointKeyEdit")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("sk-…")
        ref = endpoint.api_key_ref if endpoint else None
        if ref:
            self.use_ref.setChecked(True)
            self.ref_edit.setText(ref)
        else:
            self.no_key.setChecked(True)
        self.key_edit.textEdited.connect(lambda _t: self.use_paste.setChecked(True))
        self.ref_edit.textEdited.connect(lambda _t: self.use_ref.setChecked(True))

        form = QFormLayout()
        form.addRow("Name:", self.name_edit)
        form.addRow("Base URL:", self.url_edit)
        form.addRow("Model:", self.model_edit)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(QLabel("API key:"))
        layout.addWidget(self.no_key)
        layout.addWidget(self.use_ref)
        layout.addWidget(self.ref_edit)
        layout.addWidget(self.use_paste)
        layout.addWidget(self.key_edit)
        layout.addWidget(buttons)

    def key_choice(self) -> str:
        if self.use_paste.isChecked():
            return PASTE
        return REFERENCE if self.use_ref.isChecked() else NO_KEY

    def take_pasted_key(self) -> str:
        """The pasted key, removed from the widget at once (it must not linger in the GUI)."""
        key = self.key_edit.text()
        self.key_edit.clear()
        return key

    def endpoint_fields(self) -> dict:
        """name, base_url, model and api_key_env (a reference, or None when a key is pasted or there is none).
        Raises ConfigError for an invalid reference."""
        ref = normalise_reference(self.ref_edit.text()) if self.key_choice() == REFERENCE else None
        if self.key_choice() == REFERENCE and ref is None:
            raise ConfigError("Enter the environment variable (env:NAME) or keyring entry that holds the key.")
        return {"name": self.name_edit.text().strip(), "base_url": self.url_edit.text().strip().rstrip("/"),
                "model": self.model_edit.text().strip(), "api_key_env": ref}
