"""Acting on a failure-modes result from the Analyses page: pick a failure mode, show its images in the dataset
browser (a filter with its sentence above the grid), or send its misclassified images to the explanation workbench.
Which images belong to a mode is decided in the core (core/analyses/failure_modes/members.py); this widget only
reaches the other panes through the main window (`host.show_pane`), as the dataset browser reaches the workbench."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from ...jobs import IO, JobHandle
from ...samples import Sample

ANALYSIS = "failure-modes"


def misclassified_samples(mode, store, ctx) -> tuple[list[Sample], int, int]:
    """(the mode's misclassified images as workbench samples, its images, those the index no longer holds); a job."""
    from nemo_desktop.core.analyses.failure_modes.members import mode_members
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    ctx.progress("Loading the reference index", 0, None)
    members, missing = mode_members(mode, ReferenceIndex.load(store, mode.index_id))
    samples = [Sample(m.path, m.true_name, m.pred_name, m.confidence, mode.index_id) for m in members if not m.correct]
    return samples, len(members), missing


class FailureModeActions(QWidget):
    sig_sent = Signal(str, object)  # ("browser" | "workbench", ModeRef) once the other pane shows the mode

    def __init__(self, host, parent: QWidget | None = None):
        super().__init__(parent)
        self.host = host
        self.modes: list[Any] = []
        self.combo = QComboBox()
        self.combo.setObjectName("failureModeCombo")
        self.combo.currentIndexChanged.connect(lambda _i: self._show_sentence())
        self.sentence = QLabel("")
        self.sentence.setObjectName("failureModeSentence")
        self.sentence.setWordWrap(True)
        self.show_button = QPushButton("Show in the dataset browser")
        self.show_button.setObjectName("showFailureModeButton")
        self.show_button.setToolTip("Show only this failure mode's images in the dataset browser's grid")
        self.show_button.clicked.connect(lambda: self.show_in_browser())
        self.explain_button = QPushButton("Explain its errors in the workbench")
        self.explain_button.setObjectName("explainFailureModeButton")
        self.explain_button.setToolTip("Send the failure mode's misclassified images, with their true class, to "
                                       "the explanation workbench")
        self.explain_button.clicked.connect(lambda: self.explain_errors())
        buttons = QHBoxLayout()
        buttons.addWidget(self.show_button)
        buttons.addWidget(self.explain_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.combo)
        layout.addWidget(self.sentence)
        layout.addLayout(buttons)
        self.hide()

    def set_result(self, result: Any) -> None:
        """Offer the result's failure modes (hidden for any other analysis, or a result without hard clusters)."""
        from nemo_desktop.core.analyses.failure_modes.members import list_modes

        is_fm = getattr(result, "analysis", None) == ANALYSIS
        self.modes = list_modes(result) if is_fm else []
        self.combo.blockSignals(True)
        self.combo.clear()
        for m in self.modes:
            self.combo.addItem(m.short)
        self.combo.blockSignals(False)
        self._show_sentence()
        self.setVisible(bool(self.modes))

    def select(self, position: int) -> None:
        self.combo.setCurrentIndex(position)

    def current(self):
        i = self.combo.currentIndex()
        return self.modes[i] if 0 <= i < len(self.modes) else None

    def _show_sentence(self) -> None:
        mode = self.current()
        self.sentence.setText("" if mode is None else mode.sentence)

    def show_in_browser(self) -> JobHandle | None:
        mode = self.current()
        if mode is None:
            return None
        browser = self.host.show_pane("dataset_browser")
        handle = browser.show_failure_mode(mode)  # a job when the mode's index must be opened first
        if handle is None:
            self.sig_sent.emit("browser", mode)
        else:
            handle.sig_done.connect(lambda _d: self.sig_sent.emit("browser", mode))
        return handle

    def explain_errors(self) -> JobHandle | None:
        mode = self.current()
        if mode is None:
            return None
        store = self.host.session.store()
        handle = self.host.jobs.submit(lambda ctx: misclassified_samples(mode, store, ctx),
                                       title="Collecting the failure mode's errors", lane=IO, ask_before_quit=False)
        handle.sig_done.connect(lambda out: self._send(mode, *out))
        return handle

    def _send(self, mode, samples: list[Sample], n: int, missing: int) -> None:
        gone = f" {missing} of its images are no longer in the index." if missing else ""
        if not samples:
            self.host.show_message("No misclassified image",
                                   f"The classifier got all {n} images of {mode.title.lower()} right, so there is "
                                   f"no error to explain.{gone}")
            return
        workbench = self.host.show_pane("workbench")
        workbench.set_samples(samples, index_id=mode.index_id)
        self.host.show_status(f"{len(samples)} misclassified of {n} images of {mode.title.lower()} sent to the "
                              f"workbench.{gone}")
        self.sig_sent.emit("workbench", mode)
