"""The Model manager's speed settings: the memory profile models load under, and a local OpenAI-compatible
server (vLLM, SGLang) as the captioning model in one step.

Both are settings (`compute.memory_profile`; the endpoint `local-server` and `models.mllm`), written on the I/O
lane through `ModelSession.update_settings`; the model process reads them at each load. Which profile fits the
GPU, and why a chosen one cannot, comes from the core (`core/models/profiles.py`, asked in the model process,
which sees the GPU); the server check from `core/models/local_server.py`.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from nemo_desktop.core.models.local_server import LOCAL_SERVER
from nemo_desktop.core.models.profiles import PROFILES
from nemo_desktop.core.app.worker.protocol import JobSpec

from ....jobs import GPU, IO
from .....core.app.session import ENDPOINT_PREFIX
from ....widgets.buttons import action_button
from ....widgets.wheel_guard import GuardedComboBox
from .settings_view import SettingsView

NO_PROFILE = "None (models as loaded)"
ADVICE_TARGET = "nemo_desktop.core.app.jobs.models:memory_profile_advice"


def _words(error: dict) -> str:
    return f"{error.get('message') or 'The check failed.'} {error.get('hint') or ''}".strip()


class SpeedPanel(SettingsView):
    def __init__(self, host, parent: QWidget | None = None):
        super().__init__(host, parent)
        self._advice_job = None
        self.advice: dict | None = None  # the model process's last answer (core/models/profiles.advice)

        self.profile_combo = GuardedComboBox()
        self.profile_combo.setObjectName("memoryProfileCombo")
        self.profile_combo.addItem(NO_PROFILE, None)
        for p in PROFILES.values():  # the name only: the column stays narrow; what it does in the tooltip
            self.profile_combo.addItem(p.name, p.name)
            self.profile_combo.setItemData(self.profile_combo.count() - 1, p.summary, Qt.ItemDataRole.ToolTipRole)
        self.profile_combo.setToolTip("Which models are quantised or offloaded, as `nemo --profile`; used at the "
                                      "next model load")
        self.profile_combo.activated.connect(lambda _i: self.save_profile())
        self.profile_note = QLabel("")
        self.profile_note.setObjectName("memoryProfileNote")
        self.profile_note.setWordWrap(True)
        self.profile_note.setTextFormat(Qt.TextFormat.PlainText)
        profile_box = QGroupBox("Memory profile")
        pf = QFormLayout(profile_box)
        pf.addRow("Profile:", self.profile_combo)
        pf.addRow(self.profile_note)

        self.server_edit = QLineEdit()
        self.server_edit.setObjectName("localServerEdit")
        self.server_edit.setPlaceholderText("http://localhost:8000/v1")
        self.server_edit.returnPressed.connect(self.use_server)
        self.server_button = action_button("Check and use", self.use_server,
                                           "Ask the server for its models (GET /models); when it answers, keep "
                                           "it as the captioning model and load it", "localServerButton")
        self.server_status = QLabel("")
        self.server_status.setObjectName("localServerStatus")
        self.server_status.setWordWrap(True)
        self.server_status.setTextFormat(Qt.TextFormat.PlainText)  # error messages, model names
        self.server_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        server_box = QGroupBox("Local model server (vLLM, SGLang: OpenAI-compatible)")
        sv = QVBoxLayout(server_box)
        row = QHBoxLayout()
        row.addWidget(self.server_edit, 1)
        row.addWidget(self.server_button)
        sv.addLayout(row)
        sv.addWidget(self.server_status)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(profile_box)
        layout.addWidget(server_box)

    # -- reading ------------------------------------------------------------------------------------------
    def _show(self, settings) -> None:
        first = self.settings is None
        self.settings = settings
        self._populating = True
        try:
            i = self.profile_combo.findData(settings.compute.memory_profile)
            self.profile_combo.setCurrentIndex(max(0, i))
        finally:
            self._populating = False
        server = settings.endpoint(LOCAL_SERVER)
        if server is not None and (first or not self.server_edit.text().strip()):
            self.server_edit.setText(server.base_url)
            in_use = settings.models.mllm == ENDPOINT_PREFIX + LOCAL_SERVER
            self.server_status.setText(f"Remembered: {server.model} at {server.base_url}" +
                                       (", the default captioning model." if in_use else
                                        " (not the default captioning model now)."))
        if first:
            self.check_profile()

    # -- memory profile -----------------------------------------------------------------------------------
    def chosen_profile(self) -> str | None:
        return self.profile_combo.currentData()

    def save_profile(self):
        if self._populating or self.settings is None:
            return None
        name = self.chosen_profile()
        if self.settings.compute.memory_profile == name:
            return None
        return self._update(lambda s: setattr(s.compute, "memory_profile", name), "Saving the memory profile",
                            then=self.check_profile)

    def check_profile(self):
        """Ask the model process which profile fits its GPU and whether the chosen one holds the models."""
        name = self.chosen_profile()
        self.profile_note.setText("Checking the GPU…")
        handle = self.host.jobs.submit(JobSpec(ADVICE_TARGET, (name,)), title="Checking the memory profile",
                                       lane=GPU, ask_before_quit=False, visible=False, report_errors=False)
        self._advice_job = handle
        handle.sig_done.connect(lambda advice: self._show_advice(handle, advice))
        handle.sig_failed.connect(lambda e: handle is self._advice_job and self.profile_note.setText(
            "The GPU could not be checked: " + _words(e)))
        return handle

    def _show_advice(self, handle, advice: dict) -> None:
        if handle is not self._advice_job:  # a later choice's answer is on its way
            return
        self.advice = advice
        fits = f"This computer fits the '{advice['fits']}' profile ({advice['why']})."
        if advice["problem"]:
            text = f"The '{advice['chosen']}' profile cannot fit: {advice['problem']} {fits}"
        elif advice["chosen"]:
            est = advice["estimate_gib"]
            text = (f"'{advice['chosen']}' ({PROFILES[advice['chosen']].summary}) is used at the next model load"
                    + (f" (the models need about {est:.1f} GiB)." if est else ".") + f" {fits}")
        else:
            text = f"{fits} Choose it to load models as it says."
        self.profile_note.setText(text)

    # -- local server -------------------------------------------------------------------------------------
    def use_server(self):
        """Check the URL (GET /models) and, when it answers, keep it as the default captioning model and load
        it; the error in words otherwise (nothing is saved)."""
        from nemo_desktop.core.app.jobs.models import use_local_server

        url = self.server_edit.text().strip()
        if not url:
            self.server_status.setText("Enter the server's URL, e.g. http://localhost:8000/v1.")
            return None
        self.server_button.setEnabled(False)
        self.server_status.setText(f"Checking {url}…")
        handle = self.host.jobs.submit(lambda ctx: use_local_server(self.host.session, url, ctx),
                                       title="Checking the model server", lane=IO, ask_before_quit=False,
                                       visible=False, report_errors=False)
        handle.sig_done.connect(self._server_ready)
        handle.sig_failed.connect(lambda e: self.server_status.setText(_words(e)))
        handle.sig_finished.connect(lambda _o: self.server_button.setEnabled(True))
        return handle

    def _server_ready(self, outcome) -> None:
        check, settings = outcome
        self._show(settings)
        model = settings.endpoint(LOCAL_SERVER).model
        others = len(check.models) - 1
        self.server_edit.setText(check.base_url)
        self.server_status.setText(
            f"{check.base_url} answers{f' ({check.engine})' if check.engine else ''} and serves {model}"
            + (f" (and {others} more: change it under 'OpenAI-compatible endpoints', Edit…)" if others else "")
            + ". It is now the default captioning model.")
        self.sig_use_endpoint.emit(LOCAL_SERVER)
