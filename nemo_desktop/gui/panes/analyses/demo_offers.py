"""On an Analyses page, what the demo can add so that the page runs from it (issue 43 §6): model-diff gets a second
digits classifier (`nemo compare demo`'s model B, trained by the demo) and the 'digits' conditions; fix gets a fix
folder with a planted cause and its affected classes. One button builds (or reuses) it in the model process and
fills the page; Run is then the one click left. Shown only once the demo's dataset is on this computer."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from nemo_desktop.core.app.worker.protocol import JobSpec

from ...jobs import GPU, JobHandle

OFFERS = {  # analysis -> (what the demo makes, button text, what it says it does, the job's title)
    "model-diff": ("second-classifier", "Make a second model from the demo",
                   "Trains a second digits classifier (about a minute on a CPU) to compare with the demo's.",
                   "Training the demo's second classifier"),
    "fix": ("fix-folder", "Make a fix folder from the demo",
            "Writes train/, affected/ and rest/ folders of digits in which the demo classifier has a real weakness "
            "(digits one, four and seven on a blue background).", "Writing the demo's fix folder"),
}


class DemoOffers(QWidget):
    """One button under the page's description, for a page the demo can feed."""

    sig_made = Signal(str, object)  # analysis name, DemoExtra

    def __init__(self, pane, parent=None):
        super().__init__(parent)
        self.pane = pane
        self.job: JobHandle | None = None
        self.button = QPushButton("")
        self.button.setObjectName("demoOfferButton")
        self.button.clicked.connect(self.make)
        self.note = QLabel("")
        self.note.setObjectName("demoOfferNote")
        self.note.setWordWrap(True)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.button)
        row.addWidget(self.note, 1)
        self.hide()

    def demo_present(self) -> bool:
        from nemo_desktop.core.demo.digits import dataset_dir

        return Path(dataset_dir(self.pane.host.paths)).is_dir()

    def show_for(self, name: str | None) -> None:
        offer = OFFERS.get(name or "")
        if offer is None or not self.demo_present():
            self.hide()
            return
        self.button.setText(offer[1])
        self.button.setToolTip(offer[2])
        self.button.setEnabled(self.job is None)
        if self.job is None:
            self.note.setText(offer[2])
        self.show()

    def make(self, name: str | None = None) -> JobHandle | None:
        name = name or self.pane.shown_name()
        offer = OFFERS.get(name or "")
        if offer is None or self.job is not None:
            return self.job
        what = offer[0]
        handle = self.pane.host.jobs.submit(
            JobSpec("nemo_desktop.core.app.jobs.demo_extras:prepare_demo_extra", (self.pane.host.paths, what)),
            title=offer[3], lane=GPU)
        self.job = handle
        self.button.setEnabled(False)
        self.note.setText("Working… (see the Jobs list)")
        handle.sig_done.connect(lambda extra: self._made(name, extra))
        handle.sig_finished.connect(lambda _o: self._finished(name))
        return handle

    def _finished(self, name: str) -> None:
        self.job = None
        self.button.setEnabled(True)
        if self.pane.shown_name() == name and self.note.text().startswith("Working"):
            self.note.setText("It could not be made (see the message).")

    def _made(self, name: str, extra) -> None:
        self.pane.host.sig_models_changed.emit()  # the catalog has a new classifier
        self.pane.open_with(name, str(extra.path) if extra.what == "fix-folder" else None,
                            dict(extra.settings or {}) if extra.what == "fix-folder" else None)
        if extra.what == "second-classifier" and self.pane.shown_name() == name:
            choose(self.pane._model_boxes.get("classifier_b"), extra.model_id)
            choose(self.pane._model_boxes.get("generator"), (extra.settings or {}).get("conditions"))
        # "Press Run" only when it can run (model-diff also needs a multimodal LLM: the reason is shown below)
        then = "Press Run." if self.pane.run_problem() is None else "What Run still needs is said below."
        self.note.setText(f"{'Already there' if extra.reused else 'Made'}: {extra.summary}. {then}")
        self.sig_made.emit(name, extra)


def choose(box, ref: str | None) -> None:
    """Pick `ref` in a model box: its item when listed, else typed (the box is editable: a catalog id works)."""
    if box is None or not ref:
        return
    i = box.findData(ref)
    if i >= 0:
        box.setCurrentIndex(i)
    elif box.isEditable():
        box.setEditText(ref)
    if box.lineEdit() is not None:
        box.lineEdit().setCursorPosition(0)
