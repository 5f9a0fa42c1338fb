"""Diagnosis dialog, opened by dropping images (or File ▸ Diagnose image…).

It classifies the images with the current classifier (GPU lane) and shows each one's prediction and
top-5, asks for the true class with a completer over the classifier's classes (or takes it from each image's
folder name: `.../cat/x.jpg` is a "cat"), then runs SciTX with the current models
(`workbench.run_job.explain_samples`) and opens the result in the explanation workbench; a run on several
images fills the workbench's batch table, where skipped images are listed as skipped, not as failures.
Nothing is shown that the models did not compute.
"""
from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QStringListModel, Qt, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import (QCheckBox, QCompleter, QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QListWidget, QPushButton, QVBoxLayout, QWidget)

from nemo_desktop.core.base.batch_items import (FAILED, SKIPPED_CORRECT, SKIPPED_NO_LABEL, BatchItem,
                                                true_class_from_folder)
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.app.jobs.models import ImagePrediction, PredictionReport, predict_images  # noqa: F401
from nemo_desktop.core.app.worker.protocol import JobSpec

from ..drops import describe_rejected
from ..jobs import GPU, IO, JobHandle
from ...core.app.samples import Sample
from ..turns import on_next_turn
from ..widgets.image_viewer import ClickableImage
from ..widgets.progress_bar import ProgressBar

PREVIEW_SIDE = 256
METHOD = "scitx"


def load_preview(path: str, ctx: JobContext) -> QImage | None:
    from nemo_desktop.core.base.images import thumbnail

    try:
        img = thumbnail(path, PREVIEW_SIDE)
    except Exception:  # noqa: BLE001 - the prediction job reports unreadable images
        return None
    rgb = img.convert("RGB")
    return QImage(rgb.tobytes(), rgb.width, rgb.height, 3 * rgb.width, QImage.Format.Format_RGB888).copy()


class DiagnoseDialog(QDialog):
    sig_open_model_manager = Signal()
    sig_explained = Signal(list)  # SampleOutcome list, once the diagnosis finished
    sig_run_started = Signal(object)  # the diagnosis job's JobHandle

    def __init__(self, host, images: list[Path], rejected: list[tuple[str, str]] | None = None,
                 parent: QWidget | None = None):
        super().__init__(parent if parent is not None else host)
        self.host = host
        self.images = [str(p) for p in images]
        self.labels: dict[str, str] = {}
        self.report: PredictionReport | None = None
        self._class_lookup: dict[str, str] = {}
        self._folder_classes: dict[str, tuple[str | None, str]] = {}  # path -> (class from its folder, note)
        self._run: JobHandle | None = None
        self._starting = False  # Diagnose pressed; the run is submitted on the next turn
        self.model_problem: str | None = None  # why the method cannot start with the session's models
        self.setObjectName("diagnoseDialog")
        n = len(self.images)
        self.setWindowTitle(f"Diagnose {n} image{'s' if n != 1 else ''}")
        self.setMinimumSize(760, 460)

        self.file_list = QListWidget()
        self.file_list.setObjectName("diagnoseFiles")
        for path in self.images:
            self.file_list.addItem(Path(path).name)
            self.file_list.item(self.file_list.count() - 1).setToolTip(path)
        self.file_list.currentRowChanged.connect(self._show_image)
        self.file_list.setMaximumWidth(240)

        self.preview = ClickableImage(PREVIEW_SIDE)  # small images enlarged crisply; a click zooms
        self.preview.setObjectName("diagnosePreview")
        self.prediction_label = QLabel("Classifying…")
        self.prediction_label.setObjectName("diagnosePrediction")
        self.prediction_label.setWordWrap(True)
        self.prediction_label.setTextFormat(Qt.TextFormat.RichText)
        self.prediction_label.setAlignment(Qt.AlignmentFlag.AlignTop)

        self.label_edit = QLineEdit()
        self.label_edit.setObjectName("trueLabelEdit")
        self.label_edit.setPlaceholderText("Type the true class…")
        self.label_edit.setEnabled(False)
        self.completer_model = QStringListModel(self)
        self.completer = QCompleter(self.completer_model, self)
        self.completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.completer.setFilterMode(Qt.MatchFlag.MatchContains)
        self.completer.setMaxVisibleItems(12)
        self.label_edit.setCompleter(self.completer)
        self.label_edit.textChanged.connect(self._label_edited)
        self.same_for_all = QCheckBox("Same true class for every image")
        self.same_for_all.setChecked(True)
        self.same_for_all.setVisible(n > 1)
        self.folder_labels = QCheckBox("True class from each image's folder name (…/cat/x.jpg is a 'cat')")
        self.folder_labels.setObjectName("labelsFromFolders")
        self.folder_labels.setEnabled(False)  # once the classifier's classes are known
        self.folder_labels.toggled.connect(self._folder_labels_toggled)
        self.folder_note = QLabel("")
        self.folder_note.setObjectName("folderLabelNote")
        self.folder_note.setWordWrap(True)
        self.folder_note.setTextFormat(Qt.TextFormat.PlainText)  # folder names are the user's text
        self.label_hint = QLabel("")
        self.label_hint.setObjectName("trueLabelHint")
        self.label_hint.setWordWrap(True)
        self.label_hint.setTextFormat(Qt.TextFormat.PlainText)  # shows what the user typed

        self.skipped_label = QLabel()
        self.skipped_label.setObjectName("diagnoseSkipped")
        self.skipped_label.setWordWrap(True)
        self.skipped_label.setTextFormat(Qt.TextFormat.PlainText)
        if rejected:
            self.skipped_label.setText("Skipped:\n" + describe_rejected(rejected))
        self.skipped_label.setVisible(bool(rejected))

        self.status_label = QLabel("Loading the classifier…")
        self.status_label.setObjectName("diagnoseStatus")
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)  # error messages, model names
        self.progress = ProgressBar()
        self.progress.setRange(0, 0)

        self.buttons = QDialogButtonBox()
        self.diagnose_button = self.buttons.addButton("Diagnose", QDialogButtonBox.ButtonRole.AcceptRole)
        self.diagnose_button.setObjectName("diagnoseButton")
        self.diagnose_button.setEnabled(False)
        self.diagnose_button.setDefault(True)
        self.models_button = QPushButton("Open Model manager")
        self.buttons.addButton(self.models_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.close_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.models_button.clicked.connect(self.sig_open_model_manager)
        self.diagnose_button.clicked.connect(self.diagnose)
        self.close_button.clicked.connect(self._close_or_cancel)

        form = QFormLayout()
        form.addRow("True class:", self.label_edit)
        right = QVBoxLayout()
        top = QHBoxLayout()
        top.addWidget(self.preview)
        top.addWidget(self.prediction_label, 1)
        right.addLayout(top)
        right.addLayout(form)
        right.addWidget(self.same_for_all)
        right.addWidget(self.folder_labels)
        right.addWidget(self.folder_note)
        right.addWidget(self.label_hint)
        right.addStretch(1)
        body = QHBoxLayout()
        body.addWidget(self.file_list)
        body.addLayout(right, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(body, 1)
        layout.addWidget(self.skipped_label)
        layout.addWidget(self.status_label)
        layout.addWidget(self.progress)
        layout.addWidget(self.buttons)

        self._links: list[tuple] = []  # (signal, slot) from jobs, cut when the dialog closes
        self._predict_job = self._start_prediction()
        # The workbench's lists (methods, indexes, past results) load while the user enters the true class,
        # not as the run starts, when their handlers and repaints met the run's first steps in the GIL.
        host.panes["workbench"].ensure_shown_once()
        self.file_list.setCurrentRow(0)

    def _link(self, signal, slot) -> None:
        """Connect a job's signal to this dialog for as long as the dialog is open (a job may outlive it)."""
        signal.connect(slot)
        self._links.append((signal, slot))

    def done(self, result: int) -> None:
        for signal, slot in self._links:
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):  # already gone with its handle
                pass
        self._links.clear()
        super().done(result)

    # -- prediction -------------------------------------------------------------------------------------
    def _start_prediction(self) -> JobHandle:
        paths = list(self.images)
        handle = self.host.jobs.submit(JobSpec("nemo_desktop.core.app.jobs.models:predict_images", (paths,)),
                                       title="Classifying the dropped images", lane=GPU)
        self._link(handle.sig_progress, self._predict_progress)
        self._link(handle.sig_done, self._predicted)
        self._link(handle.sig_failed, self._prediction_failed)
        handle.sig_finished.connect(self.host.sig_models_changed)
        return handle

    def _predict_progress(self, p) -> None:
        self.status_label.setText(p.stage)

    def _predicted(self, report: PredictionReport) -> None:
        self.report = report
        self.completer_model.setStringList(sorted(report.class_names, key=str.lower))
        self._class_lookup = {n.lower(): n for n in report.class_names}
        self.label_edit.setEnabled(True)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status_label.setText(f"Classifier: {report.classifier_id} ({len(report.class_names)} classes). Enter "
                                  "the true class, then Diagnose: SciTX retrieves observations, hypothesises and "
                                  "tests each hypothesis with a counterfactual.")
        from nemo_desktop.core.data.datasets import LabelMapping

        mapping = LabelMapping(report.class_names)
        self._folder_classes = {p: true_class_from_folder(p, mapping) for p in self.images}
        self.folder_labels.setEnabled(True)
        if any(name for name, _ in self._folder_classes.values()):  # a dataset laid out as one folder per class
            self.folder_labels.setChecked(True)
        self._show_image(self.file_list.currentRow())
        self.label_edit.setFocus()
        self._check_models()  # the classifier is in memory now; the MLLM and the editor may not be on disk
        self._link(self.host.sig_models_changed, self._check_models)  # e.g. one loaded in the Model manager

    def _check_models(self) -> JobHandle:
        """Whether SciTX can start with the session's models (I/O lane, from the cache alone): Diagnose stays
        disabled, with the reason, until it can (not enabled to fail in a message box)."""
        from nemo_desktop.core.app.jobs.models import method_run_problem

        session = self.host.session
        handle = self.host.jobs.submit(lambda ctx: method_run_problem(session, METHOD, ctx),
                                       title="Checking the models", lane=IO, visible=False, ask_before_quit=False,
                                       report_errors=False)
        self._link(handle.sig_done, self._models_checked)
        return handle

    def _models_checked(self, problem: str | None) -> None:
        self.model_problem = problem
        self._validate()

    def _folder_labels_toggled(self, on: bool) -> None:
        """Per-image true classes from the folder names (typing then sets the current image's only)."""
        for path, (name, _note) in self._folder_classes.items():
            if name is not None:
                if on:
                    self.labels[path] = name
                elif self.labels.get(path) == name:
                    self.labels.pop(path)
        if on:
            self.same_for_all.setChecked(False)
        self.same_for_all.setEnabled(not on)
        found = [p for p, (name, _) in self._folder_classes.items() if name is not None]
        unmatched = sorted({Path(p).parent.name for p, (name, _) in self._folder_classes.items() if name is None})
        if not on:
            self.folder_note.setText("")
        else:
            text = f"True class from the folder name for {len(found)} of {len(self.images)} images."
            if unmatched:
                n = len(self.images) - len(found)
                shown = ", ".join(f"'{u}'" for u in unmatched[:5]) + (" …" if len(unmatched) > 5 else "")
                text += (f" {n} image{'s are' if n != 1 else ' is'} in a folder whose name is not a class of the "
                         f"classifier ({shown}): type a true class for each, or they are skipped.")
            self.folder_note.setText(text)
        self._show_image(self.file_list.currentRow())

    def _prediction_failed(self, error: dict) -> None:
        self.progress.setRange(0, 1)
        self.status_label.setText(f"The images could not be classified: {error.get('message')} "
                                  f"{error.get('hint') or ''}")

    def prediction_for(self, row: int) -> ImagePrediction | None:
        if self.report is None or not (0 <= row < len(self.report.images)):
            return None
        return self.report.images[row]

    def _show_image(self, row: int) -> None:
        if not 0 <= row < len(self.images):
            return
        path = self.images[row]
        handle = self.host.jobs.submit(lambda ctx: load_preview(path, ctx), title="Preview", lane=IO,
                                       ask_before_quit=False, visible=False)
        self._link(handle.sig_done, lambda img, r=row: self._set_preview(r, img))
        pred = self.prediction_for(row)
        if pred is not None:
            if pred.error:
                self.prediction_label.setText(f"<b>Cannot be read:</b> {html.escape(pred.error)}")
            else:
                top = pred.top5[0]
                rows = "".join(f"<tr><td>{i + 1}.</td><td>{html.escape(c.name)}</td><td align='right'>{c.prob:.3f}</td></tr>"
                               for i, c in enumerate(pred.top5))
                self.prediction_label.setText(f"Predicted: <b>{html.escape(top.name)}</b> (p = {top.prob:.3f})"
                                              f"<br><br>Top-5:<table>{rows}</table>")
        self.label_edit.blockSignals(True)
        self.label_edit.setText(self.labels.get(path, ""))
        self.label_edit.blockSignals(False)
        self._validate()

    def _set_preview(self, row: int, image: QImage | None) -> None:
        if row != self.file_list.currentRow():
            return
        if image is None:
            self.preview.set_image(None)
            self.preview.setText("(cannot be shown)")
        else:
            path = self.images[row]
            self.preview.set_image(image, path=path, title=Path(path).name, caption=str(path))

    # -- true labels ------------------------------------------------------------------------------------
    def canonical_label(self, text: str) -> str | None:
        return self._class_lookup.get(text.strip().lower())

    def _label_edited(self, text: str) -> None:
        targets = self.images if self.same_for_all.isChecked() else [self.images[self.file_list.currentRow()]]
        for path in targets:
            self.labels[path] = text
        self._validate()

    def set_true_label(self, text: str) -> None:
        self.label_edit.setText(text)

    def _readable(self) -> list[str]:
        return [p.path for p in (self.report.images if self.report else []) if not p.error]

    def _validate(self) -> bool:
        if self.report is None:
            self.diagnose_button.setEnabled(False)
            return False
        missing = [Path(p).name for p in self._readable() if self.canonical_label(self.labels.get(p, "")) is None]
        skip_missing = self.folder_labels.isChecked()  # images without a class are skipped, and listed as such
        correct = self._correctly_classified()
        wrong = [p for p in self._readable() if p not in correct]
        text = self.label_edit.text().strip()
        if text and self.canonical_label(text) is None:
            self.label_hint.setText(f"'{text}' is not one of the classifier's classes; pick one from the list.")
        elif missing and len(self._readable()) > 1:
            self.label_hint.setText(f"No true class yet for: {', '.join(missing[:5])}"
                                    f"{' …' if len(missing) > 5 else ''}" + (" (skipped)" if skip_missing else ""))
        elif not missing and correct and not wrong:
            self.label_hint.setText("The classifier already predicts the true class" +
                                    (" for this image" if len(correct) == 1 else " for every image") +
                                    ": there is no error to explain.")
        elif not missing and correct:
            self.label_hint.setText(f"{len(correct)} correctly classified image{'s are' if len(correct) > 1 else ' is'}"
                                    " skipped (nothing to explain).")
        else:
            self.label_hint.setText("")
        if self.model_problem:  # said first: no true class makes it runnable
            self.label_hint.setText(self.model_problem)
        running = self._starting or (self._run is not None and self._run.active)
        wrong = [p for p in wrong if self.canonical_label(self.labels.get(p, "")) is not None]
        ok = bool(wrong) and (not missing or skip_missing) and not running and not self.model_problem
        self.diagnose_button.setEnabled(ok)
        return ok

    def _correctly_classified(self) -> set[str]:
        """Readable images whose true class (as entered) is the classifier's top-1 prediction."""
        preds = {p.path: p for p in (self.report.images if self.report else [])}
        return {path for path in self._readable()
                if self.canonical_label(self.labels.get(path, "")) is not None
                and self.canonical_label(self.labels[path]) == preds[path].top5[0].name}

    def samples(self) -> list[Sample]:
        """The images to diagnose: readable, labelled and misclassified (correct ones have nothing to explain)."""
        out = []
        preds = {p.path: p for p in (self.report.images if self.report else [])}
        correct = self._correctly_classified()
        for path in self._readable():
            if path in correct or self.canonical_label(self.labels.get(path, "")) is None:
                continue
            top = preds[path].top5[0]
            out.append(Sample(path, self.canonical_label(self.labels[path]), top.name, top.prob))
        return out

    def batch_items(self) -> list[BatchItem]:
        """Every image of the dialog as a row of the batch table, in order: the ones `samples()` diagnoses wait
        for the run; the others say now why they are not diagnosed."""
        preds = {p.path: p for p in (self.report.images if self.report else [])}
        correct = self._correctly_classified()
        folder = self.folder_labels.isChecked()
        items = []
        for path in self.images:
            pred, true = preds.get(path), self.canonical_label(self.labels.get(path, ""))
            name, note = self._folder_classes.get(path, (None, ""))
            if true is not None and not (folder and name == true):
                note = "typed in the diagnosis dialog"
            if pred is None or pred.error:
                items.append(BatchItem(path, true, status=FAILED, error=f"The image cannot be read: "
                                       f"{pred.error if pred else 'it was not classified'}",
                                       hint="Check that the file is a complete image in a format NEMO Desktop "
                                            "reads (PNG, JPEG, WebP, ...)."))
                continue
            top = pred.top5[0]
            item = BatchItem(path, true, top.name, top.prob, label_note=note)
            if true is None:
                item.status = SKIPPED_NO_LABEL
                item.label_note = f"No true class: {note}" if folder else "No true class was given."
            elif path in correct:
                item.status = SKIPPED_CORRECT
            items.append(item)
        return items

    # -- diagnosis --------------------------------------------------------------------------------------
    def diagnose(self) -> bool:
        """Start the diagnosis (False when the input is incomplete). The workbench comes up behind this dialog
        with the run's live log (the window cannot be used while the dialog is open, and the result then opens
        where the user already looks; switching panes at the end made that turn the window's longest). It is
        shown on this turn and the run submitted on the next (`sig_run_started` carries its handle): the
        workbench's first show, the window's costliest, waited for the GIL through the run's first steps when
        both shared a turn (59-73 ms stalls)."""
        if self._starting or not self._validate():
            return False
        self._starting = True
        self.label_edit.setEnabled(False)
        self.diagnose_button.setEnabled(False)
        samples, batch = self.samples(), self.batch_items()
        workbench = self.host.panes["workbench"]
        workbench.set_samples(samples)
        self.host.show_pane("workbench")  # its lists have been loading since this dialog opened
        on_next_turn(self, lambda: self._start_run(samples, batch))
        return True

    def _start_run(self, samples: list[Sample], batch: list[BatchItem]) -> None:
        self._starting = False
        if not self.isVisible():  # closed in between
            return
        from nemo_desktop.core.app.jobs.models import AUTO

        job = JobSpec("nemo_desktop.core.app.jobs.models:diagnose_samples", (METHOD, samples, AUTO))
        n = len(samples)
        handle = self.host.jobs.submit(job, title=f"Diagnosing {n} image{'s' if n != 1 else ''}", lane=GPU)
        self._run = handle
        self.host.panes["workbench"].start_watching(handle, batch if len(batch) > 1 else None)
        self.close_button.setText("Cancel")
        self.progress.setRange(0, 0)
        self._link(handle.sig_progress, self._run_progress)
        self._link(handle.sig_done, self._explained)
        self._link(handle.sig_finished, self._run_finished)
        self.sig_run_started.emit(handle)

    def _run_progress(self, p) -> None:
        self.status_label.setText(p.stage + (f" ({p.done} of {p.total})" if p.total else ""))
        if p.total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * (p.overall_fraction or 0)))

    def _explained(self, outcomes) -> None:
        # Three event-loop turns: the workbench shown (already, since the run started, unless the user moved
        # away), then the result opened in it, then this dialog closed (the window repaints under it). Done in
        # one turn, the window stalled for their sum while the next job competed for the GIL.
        self.host.show_pane("workbench")
        on_next_turn(self, lambda: self._open_in_workbench(outcomes))

    def _open_in_workbench(self, outcomes) -> None:
        self.host.panes["workbench"].show_outcomes(outcomes)
        self.sig_explained.emit(outcomes)
        on_next_turn(self, self.accept)

    def _run_finished(self, outcome) -> None:
        if outcome.status != "done":
            self.progress.setRange(0, 1)
            self.progress.setValue(0)
            self.status_label.setText("Cancelled; finished steps are stored, so diagnosing again resumes."
                                      if outcome.status == "cancelled" else
                                      f"The diagnosis failed: {(outcome.error or {}).get('message')}")
            self.label_edit.setEnabled(True)
            self.close_button.setText("Close")
            self._validate()

    def _close_or_cancel(self) -> None:
        if self._run is not None and self._run.active:
            self._run.cancel()
            self.status_label.setText("Cancelling after the current step…")
            return
        if self._predict_job.active:
            self._predict_job.cancel()
        self.reject()
