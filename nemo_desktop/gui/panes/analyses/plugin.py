"""Analyses pane: every registered dataset, model and fit analysis, and the per-sample analyses that are not
workbench explanation methods (competency counterfactuals), on one page of the same shape.

Pick an analysis; the page asks for what it runs on (a stored run, a reference index, a folder), the models it
declares (the current one of each kind, or one from the catalog), and its settings (the form built from its
config); Run sends it to the GPU lane with progress and Cancel; the result shows as its report section renders
it, and Export writes that report as HTML or PDF. Nothing here is specific to one analysis (run_job.py). The
Models box's rows are built in model_rows.py; the result's rendering and export are in page_results.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QListWidget, QListWidgetItem, QPushButton, QScrollArea, QSplitter, QTextBrowser,
                               QVBoxLayout, QWidget)

from nemo_desktop.core.app.worker.protocol import JobSpec

from ...jobs import GPU, IO, JobHandle
from ...widgets.buttons import action_button
from ...widgets.problem_label import problem_label
from ...widgets.progress_bar import ProgressBar
from ...widgets.report_html import set_report_html
from ...widgets.table_columns import keep_words_whole
from ...widgets.text_images import attach_zoom_to_text_browser
from ..base import Pane, PaneHost
from ..workbench.widgets.method_form import MIN_FIELD_WIDTH, MethodForm
from .demo_offers import DemoOffers
from .failure_mode_actions import FailureModeActions
from .fix_actions import FixActions
from .model_diff_live import ModelDiffLivePanel
from . import page_memory
from .model_rows import chosen_models, fill_model_rows, refresh_pickers, relabel_current, relabel_models
from .page_results import PageResults, is_model_diff
from ....core.app.jobs.analyses import SESSION_KINDS, PageData, list_page_analyses, page_data, run_problem

NAME_ROLE = Qt.ItemDataRole.UserRole + 1
IDLE_STAGE = ""


@dataclass
class PageState:
    """What one analysis' page shows of its own runs: its last result (and its rendering), its running job, and
    that job's status line and progress. Each page owns one; switching pages shows the other page's."""

    result: Any = None
    html: str = ""
    job: JobHandle | None = None
    stage: str = IDLE_STAGE
    progress: tuple[int, int, int] = (0, 1, 0)  # minimum, maximum, value of the bar
    data_text: str = ""  # the folder / image typed or chosen on this page (another page's is not carried over)
    extra: dict = field(default_factory=dict)
    # The page's inputs as last left (page_memory.py), put back when it is shown again and kept across restarts.
    values: dict | None = None  # settings form: field name -> value
    models: dict | None = None  # role -> the model chosen (an offered item's value, or a typed path / spec)
    data_choice: Any = None  # the stored run / reference index chosen
    result_key: str | None = None  # the last result's store key (read back after a restart)


class AnalysesPane(PageResults, Pane):
    NAME = "analyses"
    TITLE = "Analyses"
    SUMMARY = "Dataset- and model-level analyses: failure modes, model differences, competency, global explanations."
    # (analysis, data, settings) asked for before its page was shown
    _pending: tuple[str, str | None, dict | None] | None = None

    sig_result_shown = Signal(object)  # the analysis result now on screen
    sig_result_rerendered = Signal()  # the result on screen was rendered again after it changed

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.page: PageData | None = None
        self._states: dict[str, PageState] = {}  # analysis name -> its page's own result, job and status
        self._no_page = PageState()
        self._model_boxes: dict[str, QComboBox] = {}
        # What is set on a page is written as the user goes (page_memory.keep): a crash loses none of it.
        self._keep_timer = QTimer(self)
        self._keep_timer.setSingleShot(True)
        self._keep_timer.setInterval(page_memory.WRITE_DELAY_MS)
        self._keep_timer.timeout.connect(lambda: page_memory.keep(self))

        self.analysis_list = QListWidget()
        self.analysis_list.setObjectName("analysisList")
        self.analysis_list.currentItemChanged.connect(lambda item, _prev: self._select(item))

        self.description = QLabel("")
        self.description.setObjectName("analysisDescription")
        self.description.setWordWrap(True)
        self.description.setTextFormat(Qt.TextFormat.PlainText)  # may quote a finding's sentence (open_with's note)
        # What it runs on: a stored run / index (combo box) or a path (line edit + Browse).
        self.data_label = QLabel("")
        self.data_combo = QComboBox()
        self.data_combo.setObjectName("analysisData")
        self.data_path = QLineEdit()
        self.data_path.setObjectName("analysisDataPath")
        self.data_path.textChanged.connect(lambda _t: self._inputs_changed())
        self.data_path.textChanged.connect(self._data_text_changed)
        self.data_combo.currentIndexChanged.connect(lambda _i: self._inputs_changed())
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self._browse)
        # The prompt on its own line: "Dataset folder (one sub-folder per class):" beside the field left the
        # field and Browse no room in a 1200-px window.
        self.data_label.setWordWrap(True)
        data_row = QVBoxLayout()
        data_row.addWidget(self.data_label)
        field_row = QHBoxLayout()
        for w in (self.data_combo, self.data_path, self.browse_button):
            field_row.addWidget(w)
        data_row.addLayout(field_row)
        self.models_box = QGroupBox("Models")
        self.models_form = QFormLayout(self.models_box)
        self.models_form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.models_form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.data_combo.setMinimumWidth(MIN_FIELD_WIDTH)
        self.data_path.setMinimumWidth(MIN_FIELD_WIDTH)
        self.form = MethodForm()
        self.form.sig_changed.connect(self._settings_changed)
        settings_box = QGroupBox("Settings")
        QVBoxLayout(settings_box).addWidget(self.form)

        self.run_button = QPushButton("Run")
        self.run_button.setObjectName("runAnalysisButton")
        self.run_button.clicked.connect(lambda: self.run())
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelAnalysisButton")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.export_button = QPushButton("Export report…")
        self.export_button.setObjectName("exportAnalysisButton")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(lambda: self.export())
        # Model differences: the measured differences and the scores as CSV (the same files as `nemo compare --csv`).
        self.export_csv_button = action_button(
            "Export CSV…", self.export_csv, "The per-condition differences and the explanations' scores as CSV",
            "exportCsvButton")
        self.export_csv_button.hide()
        self.progress = ProgressBar()
        self.progress.setObjectName("analysisProgress")
        self.progress.setRange(0, 1)
        self.stage_label = QLabel("")
        self.stage_label.setObjectName("analysisStage")
        self.stage_label.setWordWrap(True)
        # Why Run is disabled (an input is missing, a needed model is not on disk), said in place.
        self.run_problem_label = problem_label("runProblem")
        buttons = QHBoxLayout()
        for b in (self.run_button, self.cancel_button, self.export_button, self.export_csv_button):
            buttons.addWidget(b)

        left = QWidget()
        lv = QVBoxLayout(left)
        self.demo_offers = DemoOffers(self)  # what the demo can add so that this page runs from it
        for w in (self.description, self.demo_offers, self.models_box, settings_box):
            lv.addWidget(w)
        lv.insertLayout(2, data_row)
        lv.addLayout(buttons)
        lv.addWidget(self.run_problem_label)
        lv.addWidget(self.progress)
        lv.addWidget(self.stage_label)
        lv.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(left)
        scroll.setMinimumWidth(300)  # the settings column: its fields stay readable (a narrower one scrolls)

        self.result_view = QTextBrowser()
        self.result_view.setObjectName("analysisResult")
        self.result_view.setOpenExternalLinks(False)
        self.result_view.setPlaceholderText("Choose an analysis on the left, then Run. Its result shows here.")
        attach_zoom_to_text_browser(self.result_view)  # a click on an image of the result opens it zoomable
        keep_words_whole(self.result_view)  # a wide table scrolls; its words are never broken letter by letter

        # Under the result: what can be done with it in the other panes (a failure mode's images).
        self.failure_modes = FailureModeActions(host)
        self.failure_modes.sig_validated.connect(lambda _v: self.rerender())  # the check joins the result's page
        self.fix_actions = FixActions(host)  # a kept fix: use the fixed model
        # A model loaded elsewhere may be the one missing; a restarted model process holds none: the pickers say so.
        host.sig_models_changed.connect(self._models_changed)
        self._boxes_loaded: dict[str, str] | None = None  # the session's models the pickers were built with
        # Above the result while model-diff runs: its iterations and best-score curve, live.
        self.model_diff_live = ModelDiffLivePanel()
        self.model_diff_live.hide()
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(self.model_diff_live)
        rv.addWidget(self.result_view, 1)
        rv.addWidget(self.failure_modes)
        rv.addWidget(self.fix_actions)

        splitter = QSplitter()
        splitter.addWidget(self.analysis_list)
        splitter.addWidget(scroll)
        splitter.addWidget(right)
        # The result takes what the window adds: at 1280×800 a nine-column table (competency-bench) fits beside
        # the settings without sideways scrolling; the list and the settings keep what their text needs.
        splitter.setSizes([190, 375, 615])
        for i, stretch in enumerate((0, 0, 1)):
            splitter.setStretchFactor(i, stretch)
        self.splitter = splitter
        QVBoxLayout(self).addWidget(splitter)

    # -- each page's own state -----------------------------------------------------------------------------
    def state(self, name: str | None = None) -> PageState:
        """The state of analysis `name`'s page (default: the page shown)."""
        if name is None:
            if self.page is None:
                return self._no_page
            name = self.page.spec.name
        return self._states.setdefault(name, PageState())

    _switching = False

    def _data_text_changed(self, text: str) -> None:
        if not self._switching and self.page is not None:
            self.state().data_text = text

    def shown_name(self) -> str | None:
        return self.page.spec.name if self.page is not None else None

    @property
    def result(self) -> Any:
        """The result of the page shown (None: this page has none)."""
        return self.state().result

    @property
    def _run_job(self) -> JobHandle | None:
        return self.state().job

    def _show_state(self) -> None:
        """Put the shown page's own result, status, progress and buttons on screen."""
        state, name = self.state(), self.shown_name()
        self.stage_label.setText(state.stage)
        lo, hi, value = state.progress
        self.progress.setRange(lo, hi)
        self.progress.setValue(value)
        if state.html:
            set_report_html(self.result_view, state.html)
        else:
            self.result_view.clear()
        self.failure_modes.set_result(state.result)
        self.fix_actions.set_result(state.result)
        self.model_diff_live.setVisible(name == "model-diff" and (state.job is not None or state.result is not None))
        if name == "model-diff" and state.job is None and is_model_diff(state.result):
            self.model_diff_live.show_records(state.result.iterations)
        self._update_buttons()

    def _set_status(self, name: str, stage: str | None = None, progress: tuple[int, int, int] | None = None) -> None:
        """Record analysis `name`'s status; shown only when its page is."""
        state = self.state(name)
        if stage is not None:
            state.stage = stage
        if progress is not None:
            state.progress = progress
        if name == self.shown_name():
            if stage is not None:
                self.stage_label.setText(stage)
            if progress is not None:
                self.progress.setRange(progress[0], progress[1])
                self.progress.setValue(progress[2])

    # -- the list of analyses -----------------------------------------------------------------------------
    def on_first_shown(self) -> None:
        self.refresh()

    def refresh(self) -> JobHandle:
        handle = self.host.jobs.submit(lambda ctx: list_page_analyses(), title="Reading the analyses", lane=IO,
                                       visible=False)
        handle.sig_done.connect(self._show_analyses)
        return handle

    def _show_analyses(self, specs: list) -> None:
        self.analysis_list.clear()
        for spec in specs:
            item = QListWidgetItem(f"{spec.name}  ({spec.kind})")
            item.setData(NAME_ROLE, spec.name)
            item.setToolTip(spec.description)
            self.analysis_list.addItem(item)
        self.fit_list_width()
        if self._pending is not None and self._pending[0] in {s.name for s in specs}:
            self.select_analysis(self._pending[0])
        elif specs:
            self.analysis_list.setCurrentRow(0)

    _pending_note: str | None = None

    def fit_list_width(self) -> None:
        """The list as wide as its longest entry ("global-explanation  (dataset)"); the result gives up the room."""
        lst = self.analysis_list
        need = lst.sizeHintForColumn(0) + 2 * lst.frameWidth() + lst.verticalScrollBar().sizeHint().width() // 2
        sizes = self.splitter.sizes()
        if need > sizes[0] and sum(sizes) > 0:
            self.splitter.setSizes([need, sizes[1], max(0, sizes[2] - (need - sizes[0]))])

    def open_with(self, name: str, data: str | None = None, settings: dict | None = None,
                  note: str | None = None) -> None:
        """Show analysis `name`'s page with `data` (an image path, a folder) and `settings` (form values by field
        name) filled in: the dataset browser's "Analyse with" menu sends an image here, the workbench's "Try a
        fix…" a finding; `note` (e.g. a failure mode's sentence) is shown under the page's description. The page
        comes from a job, so the data waits for it."""
        self._pending = (name, data, dict(settings or {}))
        self._pending_note = note
        if self.analysis_list.count():
            self.select_analysis(name)
            current = self.analysis_list.currentItem()
            if self.page is not None and self.page.spec.name == name and current is not None:
                self._apply_pending()
        else:
            self.ensure_shown_once()

    def _apply_pending(self) -> None:
        if self._pending is not None and self.page is not None and self.page.spec.name == self._pending[0]:
            data, settings = self._pending[1], self._pending[2] or {}
            editors = self.form.editors
            for field_name, value in settings.items():
                if field_name in editors:
                    self.form.set_value(field_name, value)
            if data is not None:
                self.data_path.setText(data)
                i = self.data_combo.findData(data)  # a stored run / reference index chosen by its id
                if i >= 0:
                    self.data_combo.setCurrentIndex(i)
            if self._pending_note:
                self.description.setText(f"{self.page.spec.description or self.page.spec.name}\n\n{self._pending_note}")
            self._pending, self._pending_note = None, None

    def select_analysis(self, name: str) -> None:
        for i in range(self.analysis_list.count()):
            if self.analysis_list.item(i).data(NAME_ROLE) == name:
                self.analysis_list.setCurrentRow(i)
                return
        raise KeyError(name)

    def _select(self, item: QListWidgetItem | None) -> None:
        if item is None:
            return
        self._keep_timer.stop()
        page_memory.keep(self)  # the page being left keeps what was set on it, written at once
        name, session = item.data(NAME_ROLE), self.host.session
        handle = self.host.jobs.submit(lambda ctx: page_data(session, name, ctx), title=f"Preparing {name}",
                                       lane=IO, visible=False)
        handle.sig_done.connect(self._show_page)

    # -- one analysis' page --------------------------------------------------------------------------------
    def _show_page(self, page: PageData) -> None:
        from nemo_desktop.core.registry.data_inputs import data_prompt
        from nemo_desktop.core.registry.spec import in_sentence

        current = self.analysis_list.currentItem()
        if current is None or current.data(NAME_ROLE) != page.spec.name:
            return  # an earlier selection's page, finished after a later one (the I/O lane runs jobs in parallel)
        self.page, spec = page, page.spec
        self.description.setText(spec.description or spec.name)
        label, how = data_prompt(spec)
        self.data_label.setText(label + ":" if label else "")
        self.data_combo.clear()
        for c in page.data_choices:
            self.data_combo.addItem(c.label, c.value)
        if how == "store" and not page.data_choices:
            self.data_combo.addItem(f"(no {in_sentence(label)} in the results store yet)", None)
        for w, show in ((self.data_label, how != "none"), (self.data_combo, how == "store"),
                        (self.data_path, how in ("folder", "file")), (self.browse_button, how in ("folder", "file"))):
            w.setVisible(show)
        state = self.state()
        self._switching = True  # what the page remembers is put back, not re-recorded half-way
        fill_model_rows(self, page)
        self._boxes_loaded = dict(page.loaded)
        # What was left on the page, else what the page can run with (the registry entry's page defaults)
        page_memory.set_form(self, spec.config, state.values if state.values is not None else
                             dict(spec.page_defaults))
        page_memory.restore_models(self, state.models)
        page_memory.restore_data_choice(self, state.data_choice)
        self.data_path.setText(state.data_text)  # this page's own folder / image, not the last page's
        self._switching = False
        if not self.data_path.text() and spec.inputs.data == "dataset" and not spec.data_label:
            self.data_path.setText(self.open_dataset() or "")  # the dataset open in the browser (the demo's)
        self.demo_offers.show_for(spec.name)
        self._inputs_changed()
        self._apply_pending()
        self.data_path.setCursorPosition(0)  # a long path shows its start (the folder's root), not its tail
        self._show_state()
        if state.result is None and state.result_key and state.job is None:
            page_memory.read_last_result(self, spec.name, state.result_key)

    def _models_changed(self) -> None:
        """The session's models changed (a load, an unload, the model process restarted): the shown page's
        pickers are built again (model_rows.refresh_pickers), not left naming a model that is gone."""
        refresh_pickers(self)
        self._inputs_changed()

    def _settings_changed(self) -> None:
        """A setting, model or data choice of the shown page changed: written once the user pauses."""
        if not self._switching and self.page is not None:
            self._keep_timer.start()

    def _inputs_changed(self) -> None:
        self._settings_changed()
        if self.page is not None:
            self._refresh_loaded()
        relabel_models(self)
        self._update_buttons()

    def _refresh_loaded(self) -> None:
        """The models the session holds now (a model loaded or put since the page was prepared counts)."""
        session = self.host.session
        live = session.loaded()  # a dict read: cheap on the GUI thread
        wanted = session.wanted_refs()  # being loaded again by a new model process: still the current one
        self.page.loaded = dict(live)
        self.page.loaded_zero_shot = bool((session.facts("classifier") or {}).get("zero_shot"))
        for kind in SESSION_KINDS:
            if live.get(kind) or wanted.get(kind):
                self.page.current[kind] = live.get(kind) or wanted[kind]
        relabel_current(self)

    def run_problem(self) -> str | None:
        """Why Run cannot start now (shown under the buttons), or None."""
        if self.page is None:
            return None
        self._refresh_loaded()
        return run_problem(self.page, self.chosen_models(), self.chosen_data())

    def _browse(self) -> None:
        from nemo_desktop.core.registry.data_inputs import data_prompt

        if self.page is None:
            return
        start = self.browse_start()
        if data_prompt(self.page.spec)[1] == "file":
            path, _ = QFileDialog.getOpenFileName(self, "Choose an image", start)
        else:
            path = QFileDialog.getExistingDirectory(self, "Choose a folder", start)
        if path:
            self.data_path.setText(path)

    def open_dataset(self) -> str | None:
        """The dataset folder open in the Dataset browser (None: none is)."""
        browser = getattr(self.host, "panes", {}).get("dataset_browser")
        path = getattr(browser, "dataset_path", None)
        return str(path) if path else None

    def browse_start(self) -> str:
        """Where Browse starts: the folder typed on the page, else the open dataset, else the home folder."""
        from pathlib import Path

        typed = Path(self.data_path.text().strip()).expanduser() if self.data_path.text().strip() else None
        for candidate in (typed, typed.parent if typed else None,
                          Path(self.open_dataset()) if self.open_dataset() else None):
            if candidate is not None and candidate.is_dir():
                return str(candidate)
        return str(Path.home())

    def chosen_models(self) -> dict[str, str]:
        return chosen_models(self._model_boxes)

    def chosen_data(self) -> str | None:
        from nemo_desktop.core.registry.data_inputs import data_prompt

        how = data_prompt(self.page.spec)[1] if self.page else "none"
        if how == "store":
            return self.data_combo.currentData()
        if how in ("folder", "file"):
            return self.data_path.text().strip() or None
        return None

    # -- run and cancel (the result: page_results.py) -----------------------------------------------------
    def run(self) -> JobHandle | None:
        if self.page is None:
            self.host.show_message("No analysis", "Choose an analysis in the list first.")
            return None
        problem = self.run_problem()
        if problem is not None:  # checked in place: no job is started to fail
            self._update_buttons()
            return None
        name, values = self.page.spec.name, self.form.values()
        models, data = self.chosen_models(), self.chosen_data()
        handle = self.host.jobs.submit(JobSpec("nemo_desktop.core.app.jobs.analyses:run_page_analysis",
                                               (name, values, models, data)),
                                       title=f"{name}", lane=GPU)
        state = self.state(name)
        state.job = handle
        waits = any(h.lane == GPU and h is not handle and h.visible for h in self.host.jobs.active_jobs())
        self._set_status(name, "Queued: waits for the job running before it…" if waits else "Starting…", (0, 0, 0))
        handle.sig_started.connect(lambda: self._set_status(name, "Starting…"))
        handle.sig_progress.connect(lambda p: self._on_progress(name, p))
        if name == "model-diff":
            self.model_diff_live.setVisible(True)
            self.model_diff_live.start(values.get("objective"))
            handle.sig_partial.connect(self.model_diff_live.on_partial)
        handle.sig_done.connect(lambda result: self._on_done(name, result))
        handle.sig_finished.connect(lambda outcome: self._on_finished(name, outcome))
        self._update_buttons()
        return handle

    def cancel(self) -> None:
        """Cancel the shown page's own job (never another page's)."""
        name = self.shown_name()
        if name is not None and self.state(name).job is not None:
            self.state(name).job.cancel()
            self._set_status(name, "Cancelling after the current step…")

    def _on_progress(self, name: str, p) -> None:
        state = self.state(name)
        if state.job is not None and state.job.cancel_requested:
            return
        from ...widgets.progress_bar import job_progress_state

        stage, bar = job_progress_state(p)
        self._set_status(name, stage, bar)

    def _on_finished(self, name: str, outcome) -> None:
        state = self.state(name)
        state.job = None
        text = {"done": "Done.", "cancelled": "Cancelled: nothing was lost; run again to go on.",
                "failed": "Failed (see the message)."}.get(outcome.status, outcome.status)
        self._set_status(name, text, (0, 1, 1 if outcome.status == "done" else 0))
        if name == self.shown_name():
            self._update_buttons()
        self.host.sig_models_changed.emit()  # the run may have loaded models

    def _update_buttons(self) -> None:
        running = self._run_job is not None
        problem = None if running else self.run_problem()
        self.run_button.setEnabled(self.page is not None and not running and problem is None)
        self.run_button.setToolTip(problem or "")
        self.run_problem_label.setText(problem or "")
        self.run_problem_label.setVisible(bool(problem))
        self.cancel_button.setEnabled(running)
        self.export_button.setEnabled(self.result is not None and not running)
        self.export_csv_button.setVisible(is_model_diff(self.result))
        self.export_csv_button.setEnabled(is_model_diff(self.result) and not running)

    def save_state(self, settings: QSettings) -> None:
        settings.setValue("splitter", self.splitter.saveState())
        self._keep_timer.stop()
        page_memory.keep(self)
        background = page_memory.background_settings(self)
        if background is None:
            settings.setValue(page_memory.SETTINGS_KEY, page_memory.to_settings(self._states))
        else:
            background.flush()  # on disk before the window (or a test) opens the next one

    def restore_state(self, settings: QSettings) -> None:
        state = settings.value("splitter")
        if state is not None:
            self.splitter.restoreState(state)
        for name, kept in page_memory.from_settings(page_memory.kept_text(self, settings)).items():
            page = self.state(name)
            for attr, value in kept.items():
                setattr(page, attr, value)


PANE = AnalysesPane
