"""Acting on a fix result from the Analyses page: "Use the fixed model" loads the new catalog entry as the
session's classifier (only a kept, saved fix has one). The entry and its lineage were written by the core
(core/analyses/fix/saving.py); this only loads it, on the GPU lane like every model load."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from nemo_desktop.core.app.worker.protocol import JobSpec

from ...jobs import GPU, JobHandle
from ...widgets.buttons import action_button

ANALYSIS = "fix"
MODEL_JOBS = "nemo_desktop.core.app.jobs.models"  # the model jobs, run where the settings say (core/app/worker)


class FixActions(QWidget):
    def __init__(self, host, parent: QWidget | None = None):
        super().__init__(parent)
        self.host = host
        self.saved: dict | None = None
        self.label = QLabel("")
        self.label.setObjectName("fixVerdict")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.use_button = action_button("Use the fixed model", self.use_fixed_model,
                                        "Load the fixed model (its new catalog entry) as the current classifier",
                                        "useFixedModelButton")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.use_button)
        self.hide()

    def set_result(self, result: Any) -> None:
        """Shown for a fix result: its verdict, and the button when the fixed model was saved."""
        is_fix = getattr(result, "analysis", None) == ANALYSIS
        self.saved = getattr(result, "saved", None) if is_fix else None
        if is_fix:
            g = result.guard
            saved = ("" if not self.saved else f" Saved as '{self.saved['id']}'." if self.saved.get("id")
                     else f" Weights saved to {self.saved['weights']} (no catalog entry).")
            self.label.setText(f"Guard: {g['verdict']}." + saved)
        self.use_button.setVisible(bool(self.saved and self.saved.get("id")))
        self.setVisible(is_fix)

    def use_fixed_model(self) -> JobHandle | None:
        if not (self.saved and self.saved.get("id")):
            return None
        ref = self.saved["id"]  # loaded as the model manager loads any catalog entry (in the worker, in worker mode)
        handle = self.host.jobs.submit(JobSpec(f"{MODEL_JOBS}:load_model", ("classifier", ref)),
                                       title=f"Loading the fixed classifier {ref}", lane=GPU)
        handle.sig_finished.connect(lambda _o: self.host.sig_models_changed.emit())
        return handle
