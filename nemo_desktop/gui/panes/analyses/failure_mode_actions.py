"""Acting on a failure-modes result from the Analyses page: pick a failure mode, show its images in the dataset
browser (a filter with its sentence above the grid), send its misclassified images to the explanation workbench,
try a fix from it (the fix page, its images as targeted data), rank every image by its sentence (or one the user
types) in the browser, or validate the sentence with CEI.
Which images belong to a mode is decided in the core (core/analyses/failure_modes/members.py); this widget only
reaches the other panes through the main window (`host.show_pane`), as the dataset browser reaches the workbench."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from nemo_desktop.core.app.worker.protocol import JobSpec

from ...jobs import GPU, IO, JobHandle
from ....core.app.samples import Sample
from ...widgets.buttons import action_button

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
    sig_sent = Signal(str, object)  # ("browser" | "workbench" | "fix", ModeRef) once the other pane shows the mode
    sig_ranked = Signal(object)  # the SentenceRanking once the browser shows it
    sig_validated = Signal(object)  # the ModeValidation once shown

    def __init__(self, host, parent: QWidget | None = None):
        super().__init__(parent)
        self.host = host
        self.modes: list[Any] = []
        self.result: Any = None
        self.combo = QComboBox()
        self.combo.setObjectName("failureModeCombo")
        self.combo.currentIndexChanged.connect(lambda _i: self._show_sentence())
        self.sentence = QLabel("")
        self.sentence.setObjectName("failureModeSentence")
        self.sentence.setWordWrap(True)
        self.show_button = action_button(
            "Show in the dataset browser", self.show_in_browser,
            "Show only this failure mode's images in the dataset browser's grid", "showFailureModeButton")
        self.explain_button = action_button(
            "Explain its errors in the workbench", self.explain_errors,
            "Send the failure mode's misclassified images, with their true class, to the explanation workbench",
            "explainFailureModeButton")
        self.fix_button = action_button(
            "Try a fix…", self.try_fix,
            "Fine-tune the classifier with this failure mode's images (their true labels) as targeted data, measure "
            "it and keep it only if it helps (the fix page)", "tryFixFromModeButton")
        self.sentence_edit = QLineEdit()
        self.sentence_edit.setObjectName("failureModeSentenceEdit")
        self.sentence_edit.setPlaceholderText("A sentence to rank the images by, or to validate with CEI")
        self.sentence_edit.setToolTip("The failure mode's best sentence; type your own to check it instead")
        self.rank_button = action_button(
            "Rank images by this sentence", self.rank_images,
            "Show every image in the dataset browser, most similar to the sentence first (in the analysis' joint "
            "space)", "rankBySentenceButton")
        self.cei_button = action_button(
            "Validate with CEI", self.validate_cei,
            "Remove the sentence's condition from the mode's misclassified images (MLLM + image editor) and measure "
            "how much the true class's probability rises", "validateCeiButton")
        self.cei_label = QLabel("")
        self.cei_label.setObjectName("ceiVerdict")
        self.cei_label.setWordWrap(True)
        self.cei_label.setTextFormat(Qt.TextFormat.PlainText)  # quotes a sentence from a file, an LLM or the user
        buttons = QHBoxLayout()
        buttons.addWidget(self.show_button)
        buttons.addWidget(self.explain_button)
        buttons.addWidget(self.fix_button)
        buttons.addStretch(1)
        checks = QHBoxLayout()
        checks.addWidget(self.sentence_edit, 1)
        checks.addWidget(self.rank_button)
        checks.addWidget(self.cei_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.combo)
        layout.addWidget(self.sentence)
        layout.addLayout(buttons)
        layout.addLayout(checks)
        layout.addWidget(self.cei_label)
        self.hide()

    def set_result(self, result: Any) -> None:
        """Offer the result's failure modes (hidden for any other analysis, or a result without hard clusters)."""
        from nemo_desktop.core.analyses.failure_modes.members import list_modes

        is_fm = getattr(result, "analysis", None) == ANALYSIS
        self.result = result if is_fm else None
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
        self.sentence_edit.setText("" if mode is None else mode.best)
        self.cei_label.setText("")

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

    def try_fix(self) -> JobHandle | None:
        from .fix_from_mode import try_fix_from_mode

        mode = self.current()
        return try_fix_from_mode(self.host, mode, lambda _out: self.sig_sent.emit("fix", mode))

    # -- checking a sentence ----------------------------------------------------------------------------
    def _typed(self) -> str | None:
        text = self.sentence_edit.text().strip()
        if not text:
            self.host.show_message("No sentence", "Type a sentence to rank the images by or to validate.")
            return None
        return text

    def rank_images(self) -> JobHandle | None:
        """Rank every image of the analysed index by the sentence (GPU lane: the joint space embeds it), then
        show them in that order in the dataset browser."""
        sentence = self._typed() if self.result is not None else None
        if sentence is None:
            return None
        handle = self.host.jobs.submit(JobSpec("nemo_desktop.core.app.jobs.failure_modes:rank_images",
                                               (self.result, sentence)),
                                       title="Ranking the images by a sentence", lane=GPU)
        handle.sig_done.connect(self._show_ranking)
        return handle

    def _show_ranking(self, ranking) -> None:
        browser = self.host.show_pane("dataset_browser")
        handle = browser.show_ranking(ranking)  # a job when the index must be opened first
        if handle is None:
            self.sig_ranked.emit(ranking)
        else:
            handle.sig_done.connect(lambda _d: self.sig_ranked.emit(ranking))

    def validate_cei(self) -> JobHandle | None:
        """Check the sentence with CEI on the mode's misclassified images (GPU lane); refused at once when the
        session lacks a model it needs."""
        from nemo_desktop.core.base.errors import NemoError

        from ....core.app.jobs.failure_modes import cei_models

        mode = self.current()
        sentence = self._typed() if mode is not None else None
        if sentence is None:
            return None
        session, result = self.host.session, self.result
        try:
            session.preflight(cei_models(session))  # cache only, well under a second: name what is missing now
        except NemoError as exc:
            self.cei_label.setText(f"Not validated: {exc.message} {exc.hint or ''}".strip())
            return None
        self.cei_label.setText("Validating with CEI\u2026")
        handle = self.host.jobs.submit(JobSpec("nemo_desktop.core.app.jobs.failure_modes:validate_with_cei",
                                               (result, mode, sentence)),
                                       title="Validating a sentence with CEI", lane=GPU)
        handle.sig_done.connect(self._show_validation)
        handle.sig_failed.connect(lambda err: self.cei_label.setText(f"Not validated: {err.get('message', '')}"))
        handle.sig_cancelled.connect(lambda: self.cei_label.setText("CEI validation cancelled."))
        return handle

    def _show_validation(self, v) -> None:
        from nemo_desktop.core.analyses.failure_modes.validate import record_validation

        if self.result is not None:  # the job recorded it in its own copy (the model worker's, in worker mode)
            record_validation(self.result, v)
        mean = "n/a" if v.mean_cei is None else f"{v.mean_cei:+.1f} points"
        self.cei_label.setText(f"Mean CEI {mean} (n = {v.n} of {v.tested} misclassified images tried). "
                               f"{v.verdict}")
        self.sig_validated.emit(v)
