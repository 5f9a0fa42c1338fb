"""The model manager's settings: device and dtype, the Hugging Face token, OpenAI-compatible endpoints.

Settings are read and written on the I/O lane through `ModelSession.update_settings` (atomic, validated by
the core). Secrets: the token and API keys are kept as references; a pasted key is moved into the OS keyring
(`secret_refs.store_in_keyring`) and the field is cleared at once. No widget ever shows a stored key.
"""
from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout,
                               QLabel, QLineEdit, QPushButton, QTableWidgetItem, QVBoxLayout, QWidget)

from nemo_desktop.core.base.secret_refs import describe_secret_ref

from ....jobs import IO
from ....secret_refs import normalise_reference, settings_value, store_in_keyring
from ....widgets.wheel_guard import GuardedComboBox
from ....widgets.list_table import list_table
from .endpoint_dialog import PASTE, EndpointDialog
from .settings_view import SettingsView

DEVICES = ("auto", "cpu", "cuda", "cuda:0", "cuda:1", "mps")
DTYPES = ("auto", "bfloat16", "float16", "float32")
HF_KEYRING_USER = "huggingface-token"


def token_status(ref: str | None) -> str:
    """Where the token comes from and whether it is there (never its value)."""
    if not ref:
        return "No token configured: public models only."
    where = describe_secret_ref(ref)
    if ref.startswith("env:"):
        return f"From the {where}: " + ("set." if os.environ.get(ref[4:], "").strip() else
                                        "NOT set in this session.")
    return f"From the {where}."


class SettingsPanel(SettingsView):
    def __init__(self, host, parent: QWidget | None = None):
        super().__init__(host, parent)

        # -- compute --
        self.device_combo = GuardedComboBox()  # the wheel scrolls the panel, not the setting
        self.device_combo.setObjectName("deviceCombo")
        self.device_combo.setEditable(True)
        self.device_combo.addItems(DEVICES)
        self.device_combo.setToolTip("auto: the GPU when there is one, else the CPU (much slower)")
        self.dtype_combo = GuardedComboBox()
        self.dtype_combo.setObjectName("dtypeCombo")
        self.dtype_combo.addItems(DTYPES)
        self.dtype_combo.setToolTip("auto: bfloat16 on GPUs that support it, float16 on older GPUs, float32 on CPU")
        self.offload_check = QCheckBox("Offload layers to the CPU when the GPU is too small")
        self.device_combo.activated.connect(lambda _i: self._save_compute())
        self.device_combo.lineEdit().editingFinished.connect(self._save_compute)
        self.dtype_combo.activated.connect(lambda _i: self._save_compute())
        self.offload_check.toggled.connect(lambda _c: self._save_compute())
        # Where model jobs run (core/app/worker): applies at the next start of the app.
        self.worker_check = QCheckBox("Run models in a separate process")
        self.worker_check.setObjectName("workerCheck")
        self.worker_check.setToolTip("On: a crash or an out-of-memory kill in model code fails the job, not the "
                                     "window, and Cancel always ends a job. Off: models run inside the app's own "
                                     "process (simpler to debug). Applies at the next start.")
        self.grace_spin = QDoubleSpinBox()
        self.grace_spin.setObjectName("cancelGraceSpin")
        self.grace_spin.setRange(1.0, 600.0)
        self.grace_spin.setDecimals(0)
        self.grace_spin.setSuffix(" s")
        self.grace_spin.setToolTip("After Cancel, how long a job may take to stop before its model process is "
                                   "restarted (separate process only)")
        self.worker_check.toggled.connect(lambda _c: self._save_compute())
        self.grace_spin.editingFinished.connect(self._save_compute)
        compute = QGroupBox("Compute")
        form = QFormLayout(compute)
        form.addRow("Device:", self.device_combo)
        form.addRow("Precision:", self.dtype_combo)
        form.addRow(self.offload_check)
        form.addRow(self.worker_check)
        form.addRow("Cancel waits at most:", self.grace_spin)

        # -- Hugging Face token --
        self.token_ref_edit = QLineEdit()
        self.token_ref_edit.setObjectName("tokenRefEdit")
        self.token_ref_edit.setPlaceholderText("env:HF_TOKEN")
        self.token_ref_apply = QPushButton("Apply")
        self.token_ref_apply.clicked.connect(self.apply_token_reference)
        self.token_status = QLabel("")
        self.token_status.setObjectName("tokenStatus")
        self.token_status.setWordWrap(True)
        self.token_paste = QLineEdit()
        self.token_paste.setObjectName("tokenPasteEdit")
        self.token_paste.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_paste.setPlaceholderText("hf_… (stored in the OS keyring, never shown again)")
        self.token_store = QPushButton("Store in keyring")
        self.token_store.clicked.connect(self.store_pasted_token)
        hub = QGroupBox("Hugging Face token (gated models)")
        hub_form = QFormLayout(hub)
        hub_form.addRow("Reference:", self._row(self.token_ref_edit, self.token_ref_apply))
        hub_form.addRow(self.token_status)
        hub_form.addRow("Paste a token:", self._row(self.token_paste, self.token_store))

        # -- endpoints --
        self.endpoints_table = list_table(["Name", "URL", "Model", "API key"], "endpointsTable",
                                          selection=QAbstractItemView.SelectionMode.SingleSelection)
        self.endpoints_table.setMaximumHeight(130)
        add, edit, remove = QPushButton("Add…"), QPushButton("Edit…"), QPushButton("Remove")
        self.use_endpoint_button = QPushButton("Use as captioning model")
        add.clicked.connect(lambda: self.edit_endpoint(None))
        edit.clicked.connect(lambda: self.edit_endpoint(self._selected_endpoint()))
        remove.clicked.connect(self.remove_endpoint)
        self.use_endpoint_button.clicked.connect(self._use_endpoint)
        endpoints = QGroupBox("OpenAI-compatible endpoints (captioning / reasoning model)")
        ev = QVBoxLayout(endpoints)
        ev.addWidget(self.endpoints_table)
        ev.addWidget(self._row(add, edit, remove, self.use_endpoint_button, stretch_first=False))

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(compute)
        layout.addWidget(hub)
        layout.addWidget(endpoints)
        layout.addStretch(1)

    @staticmethod
    def _row(*widgets, stretch_first: bool = True) -> QWidget:
        row = QWidget()
        h = QHBoxLayout(row)
        h.setContentsMargins(0, 0, 0, 0)
        for i, w in enumerate(widgets):
            h.addWidget(w, 1 if (i == 0 and stretch_first) else 0)
        if not stretch_first:
            h.addStretch(1)
        return row

    # -- reading ------------------------------------------------------------------------------------------
    def _show(self, settings) -> None:
        self.settings = settings
        self._populating = True
        try:
            self.device_combo.setCurrentText(settings.compute.device)
            self.dtype_combo.setCurrentText(settings.compute.dtype)
            self.offload_check.setChecked(settings.compute.cpu_offload)
            self.worker_check.setChecked(settings.compute.model_process == "worker")
            self.grace_spin.setValue(float(settings.compute.cancel_grace_s))
            ref = settings.hub.token_ref
            self.token_ref_edit.setText(ref or "")
            self.token_status.setText(token_status(ref))
            self.endpoints_table.setRowCount(len(settings.endpoints))
            for i, e in enumerate(settings.endpoints):
                key = describe_secret_ref(e.api_key_ref) if e.api_key_ref else "none"
                for col, text in enumerate((e.name, e.base_url, e.model, key)):
                    item = QTableWidgetItem(text)
                    item.setToolTip(text)
                    self.endpoints_table.setItem(i, col, item)
        finally:
            self._populating = False

    # -- writing ------------------------------------------------------------------------------------------
    def _save_compute(self):
        if self._populating or self.settings is None:
            return None
        device = self.device_combo.currentText().strip() or "auto"
        dtype = self.dtype_combo.currentText()
        offload = self.offload_check.isChecked()
        process = "worker" if self.worker_check.isChecked() else "in-process"
        grace = float(self.grace_spin.value())
        c = self.settings.compute
        if (c.device, c.dtype, c.cpu_offload, c.model_process, float(c.cancel_grace_s)) == \
                (device, dtype, offload, process, grace):
            return None

        def change(s):
            s.compute.device, s.compute.dtype, s.compute.cpu_offload = device, dtype, offload
            s.compute.model_process, s.compute.cancel_grace_s = process, grace

        return self._update(change, "Saving the device settings")

    def apply_token_reference(self):
        try:
            ref = normalise_reference(self.token_ref_edit.text())
        except Exception as exc:  # noqa: BLE001 - ConfigError, shown in the dialog
            self.token_ref_edit.clear()  # it may hold a pasted key: do not keep it on screen
            self.host.show_error(exc)
            return None

        def change(s):
            s.hub.token_env = settings_value(ref)

        return self._update(change, "Saving the token reference")

    def store_pasted_token(self):
        secret = self.token_paste.text()
        self.token_paste.clear()  # never left in the widget, whatever happens next
        if not secret.strip():
            return None

        def job(ctx):
            ref = store_in_keyring(secret, HF_KEYRING_USER)
            return self.host.session.update_settings(lambda s: setattr(s.hub, "token_env", ref))

        handle = self.host.jobs.submit(job, title="Storing the token in the keyring", lane=IO, ask_before_quit=False,
                                       visible=False)
        handle.sig_done.connect(self._show)
        return handle

    # -- endpoints ----------------------------------------------------------------------------------------
    def _selected_endpoint(self):
        rows = self.endpoints_table.selectionModel().selectedRows()
        if not rows or self.settings is None:
            return None
        return self.settings.endpoints[rows[0].row()]

    def make_endpoint_dialog(self, endpoint) -> EndpointDialog:
        return EndpointDialog(endpoint, self)

    def edit_endpoint(self, endpoint):
        dialog = self.make_endpoint_dialog(endpoint)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(lambda: self.save_endpoint(dialog))
        dialog.open()
        return dialog

    def save_endpoint(self, dialog: EndpointDialog):
        try:
            fields = dialog.endpoint_fields()
        except Exception as exc:  # noqa: BLE001 - ConfigError
            self.host.show_error(exc)
            return None
        secret = dialog.take_pasted_key() if dialog.key_choice() == PASTE else None
        original = dialog.original_name

        def job(ctx):
            from nemo_desktop.core.store.settings import Endpoint

            if secret is not None:
                fields["api_key_env"] = store_in_keyring(secret, f"endpoint-{fields['name']}")
            endpoint = Endpoint(**{**fields, "api_key_env": settings_value(fields["api_key_env"])})
            endpoint.validate("endpoint")

            def change(s):
                keep = [e for e in s.endpoints if e.name not in (original, endpoint.name)]
                s.endpoints = keep + [endpoint]

            return self.host.session.update_settings(change)

        handle = self.host.jobs.submit(job, title="Saving the endpoint", lane=IO, ask_before_quit=False,
                                       visible=False)
        handle.sig_done.connect(self._show)
        return handle

    def remove_endpoint(self):
        endpoint = self._selected_endpoint()
        if endpoint is None:
            return None
        name = endpoint.name
        return self._update(lambda s: setattr(s, "endpoints", [e for e in s.endpoints if e.name != name]),
                            "Removing the endpoint")

    def _use_endpoint(self) -> None:
        endpoint = self._selected_endpoint()
        if endpoint is not None:
            self.sig_use_endpoint.emit(endpoint.name)
