"""Explanation workbench pane: pick a method and its settings, run it on samples, read the results.

Samples come from the dataset browser (selected images) or a drop on the window. A run goes to the GPU
lane with the current models (`run_job.explain_samples`); its stages show live. Results are read back from
the results store, with the same image's results of other methods side by side. Past results are listed
from the store.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QFormLayout, QGroupBox, QHBoxLayout,
                               QLabel, QListWidget, QListWidgetItem, QPushButton, QScrollArea,
                               QSplitter, QVBoxLayout, QWidget)

from nemo_desktop.core.app.worker.protocol import JobSpec
from nemo_desktop.core.base.batch_items import BatchItem

from ...jobs import GPU, IO, JobHandle
from ....core.app.samples import Sample
from ...widgets.buttons import action_button
from ...widgets.problem_label import problem_label
from ...widgets.progress_bar import ProgressBar
from ...widgets.report_path import ask_report_path, report_format
from ..base import Pane, PaneHost
from nemo_desktop.core.app.jobs.models import method_run_problem

from ....core.app.jobs.models import AUTO, SampleOutcome
from .run_job import StoredSummary, list_references, list_results
from .widgets.batch_table import BatchPanel
from .widgets.method_form import MethodForm
from .widgets.past_results import PastResultsTable
from .fix_link import fix_settings, try_fix
from .widgets.result_view import ResultBundle, ResultView, load_bundles

DEFAULT_METHOD = "scitx"


def _methods_job(session, ctx):
    """The registered methods, and the settings' defaults for their forms (so the form is built once)."""
    from nemo_desktop.core.registry.methods import get_method, list_methods

    s = session.settings()
    return [get_method(name) for name in list_methods()], {"k": s.scitx.k, "m": s.scitx.m}


class WorkbenchPane(Pane):
    NAME = "workbench"
    TITLE = "Explanation workbench"
    SUMMARY = "Explain why the classifier got a sample wrong, and test the explanation with counterfactuals."

    sig_results_shown = Signal(list)  # the ExplanationResults now on screen

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.samples: list[Sample] = []
        self.methods: dict = {}
        self._run_job: JobHandle | None = None
        self._run_is_batch = False  # the running job fills the batch table (which lists its failures)
        self._pending_index_id: str | None = None
        self._settings_overrides: dict = {}

        # -- samples --
        self.sample_list = QListWidget()
        self.sample_list.setObjectName("sampleList")
        self.sample_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.sample_list.setMaximumHeight(140)
        remove, clear = QPushButton("Remove"), QPushButton("Clear")
        remove.clicked.connect(self._remove_selected_samples)
        clear.clicked.connect(lambda: self.set_samples([]))
        samples_box = QGroupBox("Samples")
        sv = QVBoxLayout(samples_box)
        sv.addWidget(self.sample_list)
        sv.addLayout(self._hbox(remove, clear))

        # -- method --
        self.method_combo = QComboBox()
        self.method_combo.setObjectName("methodCombo")
        self.method_combo.currentIndexChanged.connect(self._method_changed)
        self.method_description = QLabel("")
        self.method_description.setWordWrap(True)
        self.method_description.setEnabled(False)
        self.form = MethodForm()
        self.reference_combo = QComboBox()
        self.reference_combo.setObjectName("referenceCombo")
        self.reference_combo.setToolTip("The reference index SciTX retrieves observations from")
        for combo in (self.method_combo, self.reference_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(16)
        self.reference_combo.addItem("Latest index of the current classifier", AUTO)
        self.reference_combo.addItem("No observations", None)
        method_box = QGroupBox("Method")
        mv = QVBoxLayout(method_box)
        mv.addWidget(self.method_combo)
        mv.addWidget(self.method_description)
        mv.addWidget(self.form)
        # Two models rather than one image: the Analyses pane's model-diff page (its live view, heatmap, CSV).
        self.compare_button = action_button(
            "Compare models…", lambda: self.host.show_pane("analyses").open_with("model-diff"),
            "How do two classifiers differ, in words? Opens the model-diff analysis", "compareModelsButton")
        mv.addWidget(self.compare_button, 0, Qt.AlignmentFlag.AlignRight)
        ref_form = QFormLayout()
        ref_form.addRow("Observations from:", self.reference_combo)
        mv.addLayout(ref_form)

        # -- run --
        self.run_button = action_button("Run on the samples", self.run,
                                        "Explain the selected samples (all of them when none is selected)",
                                        "runButton")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelRunButton")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = ProgressBar()
        self.progress.setObjectName("runProgress")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.stage_label = QLabel("")
        self.stage_label.setObjectName("runStage")
        self.stage_label.setWordWrap(True)
        self.live_log = QListWidget()
        self.live_log.setObjectName("liveLog")
        self.live_log.setMaximumHeight(90)
        self.live_log.setWordWrap(True)
        # Why Run is disabled (a model the method needs is not chosen or not on disk), said in place.
        self.run_problem_label = problem_label("workbenchRunProblem")
        self._run_problem: str | None = None  # from method_run_problem, on the I/O lane
        run_box = QGroupBox("Run")
        rv = QVBoxLayout(run_box)
        rv.addLayout(self._hbox(self.run_button, self.cancel_button))
        rv.addWidget(self.run_problem_label)
        rv.addWidget(self.progress)
        rv.addWidget(self.stage_label)
        rv.addWidget(self.live_log)

        # -- past results --
        self.past_table = PastResultsTable()
        self.past_table.sig_open.connect(self._open_past)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh_past)
        past_box = QGroupBox("Past results")
        pv = QVBoxLayout(past_box)
        pv.addWidget(self.past_table)
        pv.addWidget(refresh, 0, Qt.AlignmentFlag.AlignRight)

        left_inner = QWidget()
        lv = QVBoxLayout(left_inner)
        lv.setContentsMargins(0, 0, 4, 0)
        for w in (samples_box, method_box):
            lv.addWidget(w)
        lv.addWidget(past_box, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(left_inner)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # Always shown: a scroll bar that appears once the column is laid out narrows it, and the whole column
        # was laid out and painted twice when the pane was first shown (as a diagnosis starts).
        scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        # Run, its progress and Cancel stay in view under the scrolled column (never below the fold).
        left = QWidget()
        left.setObjectName("workbenchLeft")
        lcol = QVBoxLayout(left)
        lcol.setContentsMargins(0, 0, 0, 0)
        lcol.addWidget(scroll, 1)
        lcol.addWidget(run_box)
        left.setMinimumWidth(360)

        self.result_view = ResultView()
        self.result_view.sig_built.connect(lambda: self.sig_results_shown.emit(self.result_view.results()))
        self.result_view.sig_built.connect(self._update_export)
        self.export_button = action_button("Export…", self.export_shown,
                                           "Save the result on screen as an HTML or PDF report (Ctrl+E)",
                                           "exportResultButton")
        self.export_status = QLabel("")
        self.export_status.setObjectName("exportStatus")
        self.export_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        result_side = QWidget()
        rsv = QVBoxLayout(result_side)
        rsv.setContentsMargins(0, 0, 0, 0)
        self.fix_button = action_button(
            "Try a fix…", lambda: try_fix(self.host, self.result_view.results()),
            "Fine-tune the classifier from this finding, measure it and keep it only if it helps", "tryFixButton")
        rsv.addLayout(self._hbox(self.export_button, self.fix_button, self.export_status))
        rsv.addWidget(self.result_view, 1)
        # A run on several images lists them above the result view (hidden otherwise).
        from ...thumbnails import ThumbnailLoader

        self.batch_panel = BatchPanel(host, ThumbnailLoader(host.jobs, host.paths.thumbnails_dir, side=56,
                                                            parent=self))
        self.batch_panel.sig_open_item.connect(self.open_batch_item)
        self.batch_panel.hide()
        self.result_splitter = QSplitter(Qt.Orientation.Vertical)
        self.result_splitter.setObjectName("batchSplitter")
        self.result_splitter.addWidget(self.batch_panel)
        self.result_splitter.addWidget(result_side)
        self.result_splitter.setStretchFactor(1, 1)
        self.result_splitter.setSizes([260, 540])
        self._result_key: str | None = None  # shown, or being read
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("workbenchSplitter")
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.result_splitter)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([380, 820])
        layout = QVBoxLayout(self)
        layout.addWidget(self.splitter)
        self._update_buttons()
        self._update_export()
        # Another classifier offers other indexes; another model may be the one the method lacks.
        host.sig_models_changed.connect(lambda: self._shown_once and self.refresh_references())
        host.sig_models_changed.connect(lambda: self.methods and self.check_run_problem())

    @staticmethod
    def _hbox(*widgets) -> QHBoxLayout:
        h = QHBoxLayout()
        for w in widgets:
            h.addWidget(w)
        h.addStretch(1)
        return h

    # -- first show: methods, references, past results -------------------------------------------------
    def on_first_shown(self) -> None:
        self.load_methods()
        self.refresh_references()
        self.refresh_past()

    def load_methods(self) -> JobHandle:
        session = self.host.session
        handle = self.host.jobs.submit(lambda ctx: _methods_job(session, ctx), title="Reading the explanation "
                                       "methods", lane=IO, ask_before_quit=False, visible=False)
        handle.sig_done.connect(self._show_methods)
        return handle

    def _show_methods(self, found) -> None:
        entries, self._settings_overrides = found
        current = self.method_combo.currentData() or DEFAULT_METHOD
        self.methods = {e.name: e for e in entries}
        self.method_combo.blockSignals(True)
        self.method_combo.clear()
        for e in entries:
            self.method_combo.addItem(e.name, e.name)
            self.method_combo.setItemData(self.method_combo.count() - 1, e.description, Qt.ItemDataRole.ToolTipRole)
        self.method_combo.setCurrentIndex(max(0, self.method_combo.findData(current)))
        self.method_combo.blockSignals(False)
        self._method_changed()

    def _method_changed(self, _index: int = -1) -> None:
        entry = self.methods.get(self.method_combo.currentData())
        if entry is None:
            return
        self.method_description.setText(entry.description)
        overrides = dict(self._settings_overrides)
        self.form.set_config(entry.config, overrides)
        self.check_run_problem()
        self._update_buttons()

    def check_run_problem(self) -> JobHandle | None:
        """Ask (on the I/O lane, from the cache alone) whether the chosen method can start with the session's
        models; Run is disabled with the reason until it can."""
        method = self.method_combo.currentData()
        if not method:
            return None
        session = self.host.session
        handle = self.host.jobs.submit(lambda ctx: method_run_problem(session, method, ctx),
                                       title="Checking the method's models", lane=IO, visible=False,
                                       ask_before_quit=False, report_errors=False)
        handle.sig_done.connect(lambda problem: self._show_run_problem(method, problem))
        return handle

    def _show_run_problem(self, method: str, problem: str | None) -> None:
        if method != self.method_combo.currentData():
            return  # asked for a method chosen before
        self._run_problem = problem
        self._update_buttons()

    def select_method(self, name: str) -> None:
        i = self.method_combo.findData(name)
        if i >= 0:
            self.method_combo.setCurrentIndex(i)

    def refresh_references(self) -> JobHandle:
        session = self.host.session
        handle = self.host.jobs.submit(lambda ctx: list_references(session.store()), title="Listing reference "
                                       "indexes", lane=IO, ask_before_quit=False, visible=False)
        handle.sig_done.connect(self._show_references)
        return handle

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if self._shown_once:  # an index built in the Dataset browser a moment ago is offered on return
            self.refresh_references()

    def _show_references(self, refs) -> None:
        keep = self._pending_index_id or self.reference_combo.currentData()
        self.reference_combo.blockSignals(True)
        while self.reference_combo.count() > 2:
            self.reference_combo.removeItem(2)
        classifier = self.host.session.facts("classifier")  # the model worker's, in worker mode
        if classifier is not None:  # only indexes that fit the loaded classifier (others would be refused)
            refs = [r for r in refs if r["classifier_id"] == classifier["model_id"]]
        for r in refs:
            self.reference_combo.addItem(f"{Path(r['dataset_root']).name} — {r['classifier_id']} ({r['entries']} "
                                         f"images)", r["index_id"])
            self.reference_combo.setItemData(self.reference_combo.count() - 1, r["dataset_root"],
                                             Qt.ItemDataRole.ToolTipRole)
        i = self.reference_combo.findData(keep)
        self.reference_combo.setCurrentIndex(i if i >= 0 else 0)
        self.reference_combo.blockSignals(False)
        self._pending_index_id = None

    # -- samples ----------------------------------------------------------------------------------------
    def set_samples(self, samples: list[Sample], index_id: str | None = None) -> None:
        self.samples = list(samples)
        self.sample_list.clear()
        for s in self.samples:
            item = QListWidgetItem(s.describe())
            item.setToolTip(s.path)
            self.sample_list.addItem(item)
        if index_id:
            i = self.reference_combo.findData(index_id)
            if i >= 0:
                self.reference_combo.setCurrentIndex(i)
            else:
                self._pending_index_id = index_id
                if self._shown_once:
                    self.refresh_references()
        self._update_buttons()

    def _remove_selected_samples(self) -> None:
        rows = sorted({i.row() for i in self.sample_list.selectedIndexes()}, reverse=True)
        for r in rows:
            del self.samples[r]
            self.sample_list.takeItem(r)
        self._update_buttons()

    def chosen_samples(self) -> list[Sample]:
        rows = sorted({i.row() for i in self.sample_list.selectedIndexes()})
        return [self.samples[r] for r in rows] if rows else list(self.samples)

    def _update_buttons(self) -> None:
        running = self._run_job is not None and self._run_job.active
        problem = None if running else self._run_problem
        self.run_button.setEnabled(bool(self.samples) and bool(self.methods) and not running and problem is None)
        self.run_button.setToolTip(problem or "Explain the selected samples (all of them when none is selected)")
        self.run_problem_label.setText(problem or "")
        self.run_problem_label.setVisible(bool(problem))
        self.cancel_button.setEnabled(running)

    # -- running ----------------------------------------------------------------------------------------
    def run(self, samples: list[Sample] | None = None, method: str | None = None) -> JobHandle | None:
        samples = list(samples) if samples is not None else self.chosen_samples()
        method = method or self.method_combo.currentData() or DEFAULT_METHOD
        if not samples:
            self.host.show_message("Nothing to explain", "Add samples first: select images in the Dataset browser "
                                                         "and press 'Explain in the workbench', or drop images on "
                                                         "the window.")
            return None
        values = self.form.values() if self.methods else {}
        reference = self.reference_combo.currentData()
        n = len(samples)
        handle = self.host.jobs.submit(
            JobSpec("nemo_desktop.core.app.jobs.models:explain_samples", (method, values, samples, reference)),
            title=f"{method}: explaining {n} image{'s' if n != 1 else ''}", lane=GPU)
        batch = [BatchItem(s.path, s.true_label, s.pred_label, s.confidence) for s in samples] if n > 1 else None
        self.start_watching(handle, batch)
        return handle

    def start_watching(self, handle: JobHandle, batch: list[BatchItem] | None = None) -> None:
        """Show the live progress of a run (also used for runs started by the diagnosis dialog); `batch`, the
        rows of a run on several images (those waiting for this run in its sample order), fills the batch table."""
        self._run_job = handle
        self._run_is_batch = bool(batch)
        if batch:
            self.batch_panel.watch(handle, batch)
        self.batch_panel.setVisible(bool(batch))
        self.live_log.clear()
        self.progress.setRange(0, 0)
        self.stage_label.setText("Starting…")
        handle.sig_progress.connect(self._on_progress)
        handle.sig_partial.connect(self._on_partial)
        handle.sig_done.connect(self._on_done)
        handle.sig_finished.connect(self._on_finished)
        self._update_buttons()

    def cancel(self) -> None:
        if self._run_job is not None:
            self._run_job.cancel()
            self.stage_label.setText("Cancelling after the current step…")

    def _on_progress(self, p) -> None:
        self.progress.show_job_progress(p, self.stage_label)  # the job's one monotone bar, and the time left

    def _log(self, text: str) -> None:
        self.live_log.addItem(text)
        self.live_log.scrollToBottom()

    def _on_partial(self, item) -> None:
        if not isinstance(item, dict):
            return
        kind = item.get("kind")
        if kind == "sample":
            s = item["sample"]
            self._log(f"{Path(s.image_path).name or 'image'}: predicted {s.pred_name} ({s.prob_pred:.2f}), "
                      f"true {s.true_name} ({s.prob_true:.2f})")
        elif kind == "observations":
            self._log(f"{len(item['observations'])} observations retrieved and captioned")
        elif kind == "candidate":
            c = item["candidate"]
            if c.cei is not None:
                self._log(f"Hypothesis {item['index'] + 1}: CEI {c.cei:+.1f}")
            elif c.hypothesis:
                self._log(f"Hypothesis {item['index'] + 1}: {c.hypothesis[:120]}")
        elif kind == "outcome":
            o: SampleOutcome = item["outcome"]
            if o.error:
                self._log(f"{o.sample.name}: failed: {o.error.get('message')}")
            elif o.result is not None and o.result.result_key:
                self._log(f"{o.sample.name}: done")
                self.open_result(o.result.result_key)

    def _on_done(self, outcomes: list[SampleOutcome]) -> None:
        failed = [o for o in outcomes if o.error]
        if failed and self._run_is_batch:  # the batch table lists each failure with its hint
            self.host.show_status(f"{len(failed)} of {len(outcomes)} images could not be explained: the batch "
                                  "table says why and what to do.", 20000)
        elif failed:
            detail = "\n\n".join(f"{o.sample.path}: {o.error.get('message')}\n{o.error.get('hint') or ''}"
                                 for o in failed)
            self.host.show_error({"type": "ExplanationError", "message": f"{len(failed)} of {len(outcomes)} images "
                                  "could not be explained.", "hint": failed[0].error.get("hint") or
                                  failed[0].error.get("message"), "detail": detail})
        self.refresh_past()

    def _on_finished(self, outcome) -> None:
        self.progress.setRange(0, 1)
        self.progress.setValue(1 if outcome.status == "done" else 0)
        self.stage_label.setText({"done": "Done.", "cancelled": "Cancelled; finished steps are stored and a new "
                                  "run resumes from them."}.get(outcome.status, "Failed (see the error)."))
        self._update_buttons()
        self.host.sig_models_changed.emit()  # the run may have loaded the default models

    # -- results ----------------------------------------------------------------------------------------
    def open_result(self, key: str) -> JobHandle | None:
        if key == self._result_key:
            return None  # already shown (or being read)
        self._result_key = key
        session = self.host.session
        handle = self.host.jobs.submit(lambda ctx: load_bundles(session.store(), key, ctx),
                                       title="Opening a result", lane=IO, ask_before_quit=False, visible=False)
        handle.sig_done.connect(self.show_bundles)
        handle.sig_failed.connect(lambda _e: setattr(self, "_result_key", None))
        return handle

    def show_bundles(self, bundles: list[ResultBundle]) -> None:
        """Show results side by side; `sig_results_shown` follows once every column is built."""
        self._result_key = bundles[0].key if bundles else None
        self.result_view.show_bundles(bundles)
        self._update_export()

    def show_outcomes(self, outcomes: list[SampleOutcome]) -> None:
        """Open the first explained sample of a finished run (the others are in Past results)."""
        for o in outcomes:
            if o.result is not None and o.result.result_key:
                self.open_result(o.result.result_key)
                break
        self.refresh_past()

    def refresh_past(self) -> JobHandle:
        session = self.host.session
        handle = self.host.jobs.submit(lambda ctx: list_results(session.store()), title="Listing past results",
                                       lane=IO, ask_before_quit=False, visible=False)
        handle.sig_done.connect(self._show_past)
        return handle

    def _show_past(self, rows: list[StoredSummary]) -> None:
        self.past_table.show_rows(rows)

    def _open_past(self, key: str) -> None:
        self._result_key = None  # reopening on purpose reads it again (another method may have run)
        self.open_result(key)

    # -- batch ------------------------------------------------------------------------------------------
    def open_batch_item(self, item: BatchItem) -> JobHandle | None:
        if item.result_key:
            self._result_key = None  # reopening on purpose reads it again
            return self.open_result(item.result_key)
        self.host.show_status(f"{item.name}: {item.status}. {item.summary_text()}")
        return None

    # -- export -----------------------------------------------------------------------------------------
    def _update_export(self) -> None:
        self.export_button.setEnabled(bool(self.result_view.columns) and self.result_view.built)
        results = self.result_view.results() if self.export_button.isEnabled() else []
        self.fix_button.setEnabled(bool(results) and fix_settings(results[0]) is not None)

    def export_shown(self, target: Path | None = None) -> JobHandle | None:
        """Export the result on screen (the first column: the result that was opened) as HTML or PDF, by the
        file's extension; asks where when `target` is None. None when nothing is shown or the user cancels."""
        from ..report_exporter.plugin import ReportItem, export_items

        results = self.result_view.results()
        if not results or not results[0].result_key:
            self.host.show_status("Nothing to export: open a result first.")
            return None
        r = results[0]
        item = ReportItem("result", r.result_key, Path(r.sample.image_path or "image").name, r.method, None)
        target = target or ask_report_path(self, "Export this result", item.file_name("html"))
        if target is None:
            return None
        fmt = report_format(target)
        session = self.host.session
        handle = self.host.jobs.submit(lambda ctx: export_items(session.store(), [item], fmt, target, ctx),
                                       title=f"Exporting {item.title} as {fmt.upper()}", lane=IO)
        self.export_status.setText("Exporting…")
        handle.sig_done.connect(lambda paths: self.export_status.setText(f"Wrote {paths[0]}"))
        handle.sig_done.connect(lambda paths: self.host.show_status(f"Exported the result to {paths[0]}"))
        handle.sig_failed.connect(lambda e: self.export_status.setText(f"Export failed: {e.get('message')}"))
        return handle

    # -- state ------------------------------------------------------------------------------------------
    def save_state(self, settings: QSettings) -> None:
        settings.setValue("splitter", self.splitter.saveState())
        if self.method_combo.currentData():
            settings.setValue("method", self.method_combo.currentData())

    def restore_state(self, settings: QSettings) -> None:
        state = settings.value("splitter")
        if state is not None:
            self.splitter.restoreState(state)
        method = settings.value("method")
        if method:
            self.method_combo.addItem(method, method)  # replaced by the real list on first show


PANE = WorkbenchPane
