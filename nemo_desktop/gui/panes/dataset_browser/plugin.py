"""Dataset browser pane: open a folder or CSV manifest, index it with the classifier, browse and filter.

Opening reads the dataset on the I/O lane and shows it through its reference index when one exists.
Indexing runs on the GPU lane (`core.data.reference_index.build_index`, resumable, with progress).
Filters rebuild the grid's row array with numpy; thumbnails come from `ThumbnailLoader`.
Selected images go to the explanation workbench with their true class; one image can be sent (right-click) to
a per-sample analysis of the Analyses pane. With a stored competency estimator for the loaded classifier, a
competency row scores the dataset and sorts / filters by it (competency_controls.py). A failure mode found by
the failure-modes analysis (Analyses pane) can be shown here: the grid then holds only its images, its sentence
above them; or every image ranked by a sentence (most similar first), the sentence above them.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from PySide6.QtCore import QItemSelection, QItemSelectionModel, QSettings, Qt, QTimer, Signal
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel, QMenu, QPushButton, QSizePolicy, QSplitter,
                               QToolButton, QVBoxLayout)

from nemo_desktop.core.app.worker.protocol import JobSpec

from ...jobs import GPU, IO, JobHandle
from ....core.app.samples import Sample
from ...thumbnails import ThumbnailLoader
from ...widgets.buttons import action_button
from ...widgets.progress_bar import ProgressBar
from ..base import Pane, PaneHost
from .filter_controls import build_filter_rows, build_side_panel
from .analysis_links import failure_modes_button, grid_menu, send_to_analysis
from ....core.app.dataset_browser.browse_data import (BrowseData, count_new_images, open_browse_data, open_index,
                                                      open_indexed)
from .competency_controls import CompetencyControls
from .filters import (ALL, CONFIDENCE_DESC, DATASET_ORDER, MISCLASSIFIED, FilterSpec,
                      class_accuracy, filter_rows)
from .widgets.class_table import CLASS_ROLE
from .widgets.grid import GridModel, make_grid_view
from .widgets.grid_image import ThumbnailSizeControl, attach_image_viewer, view_current_image
from .widgets.mode_bar import FailureModeBar

ANY = -1
COUNT_DELAY_MS = 400  # the comparison of an index with the files on disk waits for the first screen
SIDE_SHARE = 0.6  # the most of the pane the side panel takes to show a confusion matrix whole


class DatasetBrowserPane(Pane):
    NAME = "dataset_browser"
    TITLE = "Dataset browser"
    SUMMARY = "Open a folder of images, a CSV manifest or a FiftyOne dataset and see where the classifier goes wrong."

    sig_opened = Signal(object)  # BrowseData, once shown
    sig_filtered = Signal(int)  # rows shown after a filter

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.data: BrowseData | None = None
        self.dataset_path: str | None = None
        self._open_job: JobHandle | None = None
        self._count_job: JobHandle | None = None
        self._index_job: JobHandle | None = None
        self.last_filter_ms: float | None = None
        self.failure_mode = None  # a failure_modes.members.ModeRef whose images alone are shown, or None
        self.ranking = None  # a failure_modes.by_sentence.SentenceRanking that orders the grid, or None
        self._rank_places = None  # each row's place in the ranking (computed once per dataset shown)
        self.index_batch_size = 32  # images per classifier call while indexing (each batch is stored at once)

        self.thumbnails = ThumbnailLoader(host.jobs, host.paths.thumbnails_dir, parent=self)
        self.grid_model = GridModel(self.thumbnails, self)
        self.grid = make_grid_view(self.grid_model)
        self.grid.selectionModel().selectionChanged.connect(lambda *_: self._update_selection())
        self.grid.doubleClicked.connect(lambda _i: self.explain_selected())
        self.thumbnail_size = ThumbnailSizeControl(self.grid)
        attach_image_viewer(self)  # Space opens the zoomable viewer; the context menu below offers it too
        self.grid.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.grid.customContextMenuRequested.connect(self._grid_menu)
        self.image_analyses: list[tuple[str, str]] = []  # (name, description): what one image can be sent to
        self.competency = CompetencyControls(self)
        self.competency.sig_filter_changed.connect(lambda: self._filter_timer.start())
        self.competency.sig_column_changed.connect(lambda _c: self.apply_filters())
        host.sig_models_changed.connect(self.competency.refresh)

        # -- top bar: open, index --
        self.open_button = QToolButton()
        self.open_button.setText("Open dataset")
        self.open_button.setObjectName("openDatasetButton")
        self.open_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.open_button)
        menu.addAction("Folder with one sub-folder per class…", self.choose_folder)
        menu.addAction("CSV manifest (path,label)…", self.choose_csv)
        from .fiftyone_open import add_open_action

        self.open_fiftyone_action = add_open_action(self, menu)
        self.open_button.setMenu(menu)
        self.path_label = QLabel("No dataset open.")
        self.path_label.setObjectName("datasetPath")
        self.path_label.setMinimumWidth(60)  # long paths must not widen the window
        self.path_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.index_button = QPushButton("Index with the classifier")
        self.index_button.setObjectName("indexButton")
        self.index_button.setToolTip("Run every image through the current classifier (only new or changed images; "
                                     "resumable) to see predictions and to use it as SciTX's reference set")
        self.index_button.clicked.connect(self.index_dataset)
        self.index_progress = ProgressBar()
        self.index_progress.setObjectName("indexProgress")
        self.index_progress.setMaximumWidth(220)
        self.index_progress.hide()
        self.cancel_index_button = QPushButton("Cancel")
        self.cancel_index_button.clicked.connect(self.cancel_indexing)
        self.cancel_index_button.hide()
        top = QHBoxLayout()
        top.addWidget(self.open_button)
        top.addWidget(self.path_label, 1)
        top.addWidget(self.index_progress)
        top.addWidget(self.cancel_index_button)
        top.addWidget(self.index_button)
        top.addWidget(self.thumbnail_size)  # here, not in the filter rows: those set the pane's minimum width
        self.info_label = QLabel("")
        self.info_label.setObjectName("datasetInfo")
        self.info_label.setWordWrap(True)

        filters, confidence = build_filter_rows(self)
        side = build_side_panel(self, host)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("datasetSplitter")
        self.splitter.addWidget(self.grid)
        self.splitter.addWidget(side)
        self.splitter.setStretchFactor(0, 4)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([900, 300])
        # The Confusion tab widens the side panel to show its columns whole (up to SIDE_SHARE of the pane); the
        # other tabs give the grid its room back.
        self._sizes_before_wide: list[int] | None = None
        self.analytics.sig_width_wanted.connect(self._fit_side_panel)

        # -- to the workbench --
        self.selection_label = QLabel("")
        self.selection_label.setWordWrap(True)  # wraps instead of widening the pane (its minimum width)
        self.explain_button = action_button(
            "Explain in the workbench", self.explain_selected,
            "Send the selected images, with their true class, to the explanation workbench", "explainSelectedButton")
        self.view_button = action_button("View image", lambda: view_current_image(self),
                                         "Open the current image at full resolution, zoomable (Space)",
                                         "viewImageButton")
        bottom = QHBoxLayout()
        bottom.addWidget(self.selection_label, 1)
        bottom.addWidget(self.view_button)
        bottom.addWidget(self.explain_button)
        self.failure_modes_button = failure_modes_button(self)
        bottom.addWidget(self.failure_modes_button)
        from .fiftyone_link import fiftyone_button, open_in_fiftyone

        self.fiftyone_session = None  # FiftyOne's app session, once opened (fiftyone_link.py)
        self.fiftyone_button = fiftyone_button(self)
        self.fiftyone_button.clicked.connect(lambda: open_in_fiftyone(self))
        bottom.addWidget(self.fiftyone_button)

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.info_label)
        self.warning_label = QLabel("")
        self.warning_label.setObjectName("predictionWarning")
        self.warning_label.setWordWrap(True)
        self.warning_label.setStyleSheet("QLabel { background: #fff5e6; border-left: 4px solid #d9822b; "
                                         "padding: 4px 8px; color: #1b1b1b; }")
        self.warning_label.hide()
        layout.addWidget(self.warning_label)
        self.mode_bar = FailureModeBar()  # while a failure mode filters the grid: its sentence, and "Show all"
        self.mode_bar.sig_cleared.connect(lambda: self.show_failure_mode(None))
        self.mode_bar.sig_fix.connect(lambda: self.try_fix_from_mode())
        self.mode_bar.sig_fiftyone.connect(lambda: open_in_fiftyone(self, self.failure_mode))
        layout.addLayout(filters)
        layout.addLayout(confidence)
        layout.addWidget(self.competency.bar)
        layout.addWidget(self.mode_bar)
        layout.addWidget(self.splitter, 1)
        layout.addLayout(bottom)
        self._set_filters_enabled(False)
        self._update_selection()
        self.index_button.setEnabled(False)

    # -- opening --------------------------------------------------------------------------------------
    def open_dataset(self) -> None:
        """File ▸ Open dataset…: a folder (the common case); the button's menu also offers a CSV."""
        self.choose_folder()

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a dataset folder (one sub-folder per class)")
        if folder:
            self.open_path(folder)

    def choose_csv(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a CSV manifest", "", "CSV manifest (*.csv);;All files (*)")
        if path:
            self.open_path(path)

    def open_path(self, path: str | Path, index_id: str | None = None) -> JobHandle:
        """Show the dataset's reference index at once when it has one, then compare it with the files on
        disk; read the files first only when there is no index."""
        for job in (self._open_job, self._count_job):
            if job is not None and job.active:
                job.cancel()
        path = str(path)
        session = self.host.session
        prefer = self._loaded_classifier_id()
        self.path_label.setText(f"Opening {path}…")

        def job(ctx):
            store = session.store()
            return open_indexed(path, store, ctx, prefer_classifier=prefer, index_id=index_id) or \
                open_browse_data(path, store, ctx, prefer_classifier=prefer, index_id=index_id)

        handle = self.host.jobs.submit(job, title=f"Opening {Path(path).name}", lane=IO, ask_before_quit=False)
        handle.sig_done.connect(lambda data: self._opened(path, data))
        handle.sig_failed.connect(lambda _e: self.path_label.setText(
            f"Could not open {path}." if self.data is None else self.path_label.text()))
        self._open_job = handle
        return handle

    def _opened(self, path: str, data: BrowseData) -> None:
        self._show_data(path, data)
        if data.not_indexed is None:  # shown from the index alone: then look for new files (may be slow)
            # Reading a large dataset is CPU-bound Python that competes with the GUI thread for the GIL:
            # start it once the first screen is painted.
            QTimer.singleShot(COUNT_DELAY_MS, self, lambda: self._start_count(path, data))

    def _start_count(self, path: str, data: BrowseData) -> None:
        if data is not self.data:
            return
        handle = self.host.jobs.submit(lambda ctx: count_new_images(path, data, ctx),
                                       title=f"Looking for new images in {Path(path).name}", lane=IO,
                                       ask_before_quit=False, report_errors=False)
        handle.sig_done.connect(lambda n: self._counted(data, n))
        handle.sig_failed.connect(lambda e: data is self.data and self.info_label.setText(
            self.info_label.text().replace("looking for new images…", "the files on disk could not be read "
                                           f"({e.get('message')})")))
        self._count_job = handle

    def _counted(self, data: BrowseData, n: int) -> None:
        if data is self.data:
            data.not_indexed = n
            self._describe(data)

    def _loaded_classifier_id(self) -> str | None:
        """The model id an index records for the loaded classifier (its ModelInfo.model_id)."""
        return (self.host.session.facts("classifier") or {}).get("model_id")  # the worker's, in worker mode

    def _fit_side_panel(self, wanted: int) -> None:
        sizes = self.splitter.sizes()
        total = sum(sizes)
        if total <= 0 or len(sizes) != 2:
            return
        if wanted > sizes[1]:
            side = min(wanted, int(total * SIDE_SHARE))
            if side > sizes[1]:
                self._sizes_before_wide = self._sizes_before_wide or sizes
                self.splitter.setSizes([total - side, side])
        elif wanted == 0 and self._sizes_before_wide is not None:
            self.splitter.setSizes(self._sizes_before_wide)
            self._sizes_before_wide = None

    def show_data(self, path: str, data: BrowseData) -> None:
        """Show `data` (already read, e.g. by a script) as if it had been opened from `path`."""
        self._show_data(path, data)

    def _show_data(self, path: str, data: BrowseData) -> None:
        if self.data is None or data.root != self.data.root:
            self.thumbnails.clear()  # another dataset: keep no pixmaps (the disk cache stays)
        shown = self.failure_mode or self.ranking
        if shown is not None and data.index_id != shown.index_id:
            self._set_mode(None)  # another dataset or index: the failure mode's rows mean nothing there
        self._rank_places = None
        self.dataset_path = path
        self.data = data
        self._fill_class_combos(data)
        self.class_model.set_rows(class_accuracy(data), data.indexed)
        self.analytics.set_data(data)
        self._set_filters_enabled(True)
        self.index_button.setEnabled(True)
        from .fiftyone_link import update_button

        update_button(self.fiftyone_button, data.indexed)
        update_button(self.mode_bar.fiftyone_button, data.indexed)
        self.path_label.setText(path)
        self._describe(data)
        self.competency.dataset_shown(data)
        self.apply_filters()
        self.sig_opened.emit(data)

    def _describe(self, data: BrowseData) -> None:
        parts = [f"{len(data):,} images in {len(data.class_names)} classes"]
        if data.indexed:
            acc = float(data.correct.mean()) if len(data) else 0.0
            parts.append(f"indexed with {data.classifier_id} ({100 * acc:.1f}% correct)")
            if data.not_indexed is None:
                parts.append("looking for new images…")
            elif data.not_indexed:
                parts.append(f"{data.not_indexed:,} new images not indexed yet")
            if data.errors:
                parts.append(f"{len(data.errors)} unreadable")
            self.accuracy_label.setText(f"Overall: {100 * acc:.1f}% of {len(data):,}")
        else:
            parts.append("not indexed yet: index it to see the classifier's predictions")
            self.accuracy_label.setText("Index the dataset to see accuracies.")
        if data.skipped_labels:
            parts.append(f"classes the classifier does not know were left out: "
                         f"{', '.join(sorted(data.skipped_labels)[:5])}")
        self.info_label.setText("; ".join(parts) + ".")
        warning = data.prediction_warning()
        self.warning_label.setText(f"⚠ {warning}" if warning else "")
        self.warning_label.setVisible(bool(warning))

    def _fill_class_combos(self, data: BrowseData) -> None:
        for combo in (self.true_combo, self.pred_combo):
            combo.blockSignals(True)
            combo.clear()
            combo.addItem("Any", ANY)
            for i, name in enumerate(data.class_names):
                combo.addItem(name, i)
            combo.blockSignals(False)

    def _set_filters_enabled(self, enabled: bool) -> None:
        indexed = enabled and self.data is not None and self.data.indexed
        self.true_combo.setEnabled(enabled)
        for w in (self.correctness_combo, self.pred_combo, self.conf_min, self.conf_max, self.order_combo,
                  self.mistakes_button, self.failure_modes_button):
            w.setEnabled(indexed)

    # -- filtering ------------------------------------------------------------------------------------
    def filter_spec(self) -> FilterSpec:
        true = self.true_combo.currentData()
        pred = self.pred_combo.currentData()
        scored = self.data is not None and self.data.competency is not None
        return FilterSpec(correctness=self.correctness_combo.currentData() or ALL,
                          true_class=None if true in (None, ANY) else int(true),
                          pred_class=None if pred in (None, ANY) else int(pred),
                          conf_min=self.conf_min.value(), conf_max=self.conf_max.value(),
                          order=self.order_combo.currentData() or DATASET_ORDER,
                          competency_max=self.competency.max_spin.value() if scored else 1.0,
                          least_competent_first=scored and self.competency.least_first.isChecked())

    def apply_filters(self) -> int:
        if self.data is None:
            return 0
        self._filter_timer.stop()
        started = time.perf_counter()
        spec = self.filter_spec()
        if not self.data.indexed:
            spec = FilterSpec(true_class=spec.true_class, competency_max=spec.competency_max,
                              least_competent_first=spec.least_competent_first)
        rows = filter_rows(self.data, spec)
        if self.failure_mode is not None:
            from nemo_desktop.core.analyses.failure_modes.members import member_mask

            rows = rows[member_mask(self.data.paths[rows], self.failure_mode)]
        if self.ranking is not None:
            from nemo_desktop.core.analyses.failure_modes.by_sentence import ranked_places

            if self._rank_places is None:
                self._rank_places = ranked_places(self.data.paths, self.ranking)
            rows = rows[np.argsort(self._rank_places[rows], kind="stable")]
        same_data = self.grid_model.data_ is self.data
        kept = self.selected_rows() if same_data and self.grid.selectionModel() is not None else []
        self.grid_model.set_view(self.data, rows)
        if kept:  # a re-filter (a competency score, a slider) keeps the images selected that are still shown
            self._reselect(rows, kept)
        self.last_filter_ms = 1000 * (time.perf_counter() - started)
        self.count_label.setText(f"{len(rows):,} of {len(self.data):,} shown"
                                 + (" (failure mode)" if self.failure_mode is not None else "")
                                 + (" (ranked by a sentence)" if self.ranking is not None else ""))
        self._update_selection()
        self.sig_filtered.emit(len(rows))
        return len(rows)

    def set_filter(self, *, correctness: str | None = None, true_class: int | None = None,
                   pred_class: int | None = None, conf_min: float | None = None, conf_max: float | None = None,
                   order: str | None = None) -> int:
        """Set several filters and apply them once (scripts, tests, clicks in the class table and charts).
        None leaves a filter as it is; ANY (-1) clears a class filter."""
        widgets = (self.correctness_combo, self.true_combo, self.pred_combo, self.conf_min, self.conf_max,
                   self.order_combo)
        for w in widgets:
            w.blockSignals(True)
        try:
            if correctness is not None:
                self.correctness_combo.setCurrentIndex(self.correctness_combo.findData(correctness))
            if true_class is not None:
                self.true_combo.setCurrentIndex(self.true_combo.findData(true_class))
            if pred_class is not None:
                self.pred_combo.setCurrentIndex(self.pred_combo.findData(pred_class))
            if conf_min is not None:
                self.conf_min.setValue(conf_min)
            if conf_max is not None:
                self.conf_max.setValue(conf_max)
            if order is not None:
                self.order_combo.setCurrentIndex(self.order_combo.findData(order))
        finally:
            for w in widgets:
                w.blockSignals(False)
        return self.apply_filters()

    def show_ranking(self, ranking) -> JobHandle | None:
        """Show every image most similar to `ranking.sentence` first (a failure_modes.by_sentence.SentenceRanking;
        the other filters still apply), the sentence above the grid; None returns to the dataset order."""
        return self.show_failure_mode(ranking)

    def show_failure_mode(self, mode) -> JobHandle | None:
        """Show only the images of `mode` (a failure_modes.members.ModeRef), its sentence above the grid; None
        shows every image again. The index the analysis ran on is opened first when another one is shown.
        A SentenceRanking orders the grid instead (show_ranking)."""
        if mode is not None and (self.data is None or self.data.index_id != mode.index_id):
            if mode.index_id is None:
                self.host.show_message("Failure mode", "The result does not name the index it ran on.")
                return None
            session, index_id = self.host.session, mode.index_id
            handle = self.host.jobs.submit(lambda ctx: open_index(index_id, session.store(), ctx),
                                           title="Opening the failure mode's index", lane=IO, ask_before_quit=False)
            handle.sig_done.connect(lambda data: self._opened_for_mode(mode, data))
            return handle
        self._set_mode(mode)
        self.apply_filters()
        return None

    def try_fix_from_mode(self) -> JobHandle | None:
        """The mode bar's "Try a fix…": the fix page for the failure mode that filters the grid."""
        from ..analyses.fix_from_mode import try_fix_from_mode

        return try_fix_from_mode(self.host, self.failure_mode)

    def _opened_for_mode(self, mode, data: BrowseData) -> None:
        self._set_mode(mode)  # before showing: _show_data keeps a mode of the index it shows
        self._opened(data.root or mode.dataset_root or "", data)

    def _set_mode(self, mode) -> None:
        from nemo_desktop.core.analyses.failure_modes.by_sentence import SentenceRanking

        ranks = isinstance(mode, SentenceRanking)
        self.failure_mode = None if ranks else mode
        self.ranking, self._rank_places = (mode if ranks else None), None
        self.mode_bar.set_mode(mode)

    def _class_clicked(self, index) -> None:
        self.set_filter(true_class=int(self.class_model.data(index, CLASS_ROLE)))

    def show_confusion_cell(self, true_class: int, pred_class: int) -> int:
        """Exactly the images of one confusion-matrix cell (other filters cleared)."""
        return self.set_filter(correctness=ALL, true_class=true_class, pred_class=pred_class, conf_min=0.0,
                               conf_max=1.0)

    def show_class(self, true_class: int) -> int:
        """Exactly the images of one accuracy bar: the class, whatever was predicted."""
        return self.set_filter(correctness=ALL, true_class=true_class, pred_class=ANY, conf_min=0.0, conf_max=1.0)

    def show_confident_mistakes(self) -> int:
        return self.set_filter(correctness=MISCLASSIFIED, true_class=ANY, pred_class=ANY, conf_min=0.0,
                               conf_max=1.0, order=CONFIDENCE_DESC)

    # -- indexing -------------------------------------------------------------------------------------
    def index_dataset(self) -> JobHandle | None:
        if self.dataset_path is None:
            return None
        if self._index_job is not None and self._index_job.active:
            return self._index_job
        path, batch = self.dataset_path, self.index_batch_size
        handle = self.host.jobs.submit(JobSpec("nemo_desktop.core.app.dataset_browser.browse_data:index_dataset_job",
                                                (path, batch)),
                                       title=f"Indexing {Path(path).name}", lane=GPU)
        self._index_job = handle
        self.index_button.setEnabled(False)
        self.index_progress.setRange(0, 0)
        self.index_progress.show()
        self.cancel_index_button.show()
        handle.sig_progress.connect(self._index_progress)
        handle.sig_done.connect(lambda data: self._show_data(path, data))
        handle.sig_cancelled.connect(lambda: self._reopen_after_cancel(path))
        handle.sig_finished.connect(self._index_finished)
        handle.sig_finished.connect(lambda _o: self.host.sig_models_changed.emit())  # it may have loaded one
        return handle

    def cancel_indexing(self) -> None:
        if self._index_job is not None:
            self._index_job.cancel()

    def _index_progress(self, p) -> None:
        from ...jobs import describe_seconds_left

        fraction = p.overall_fraction  # the job's, which never goes back
        if fraction is not None:
            self.index_progress.setRange(0, 1000)
            self.index_progress.setValue(int(1000 * fraction))
        else:
            self.index_progress.setRange(0, 0)
        left = describe_seconds_left(p.seconds_left)
        count = f": {p.done} / {p.total}" if p.total else ""
        self.index_progress.setFormat(f"{p.stage}{count}" + (f" · {left}" if left else ""))

    def _index_finished(self, _outcome) -> None:
        self.index_progress.hide()
        self.cancel_index_button.hide()
        self.index_button.setEnabled(self.dataset_path is not None)

    def _reopen_after_cancel(self, path: str) -> None:
        """A cancelled indexing keeps every finished batch: show what is indexed now."""
        self.host.show_status("Indexing cancelled; the images indexed so far are kept. Index again to resume.")
        self.open_path(path)

    RESELECT_MAX = 5000  # a larger selection is not restored after a re-filter (it would cost the GUI thread)

    def _reselect(self, rows: np.ndarray, kept: list[int]) -> None:
        if len(kept) > self.RESELECT_MAX:
            return
        places = np.flatnonzero(np.isin(rows, np.asarray(kept, np.int64)))
        if not len(places):
            return
        selection = QItemSelection()
        for r in places:
            index = self.grid_model.index(int(r), 0)
            selection.select(index, index)
        self.grid.selectionModel().select(selection, QItemSelectionModel.SelectionFlag.ClearAndSelect)
        self.grid.selectionModel().setCurrentIndex(self.grid_model.index(int(places[0]), 0),
                                                   QItemSelectionModel.SelectionFlag.NoUpdate)

    # -- selection to the workbench -------------------------------------------------------------------------
    def selected_rows(self) -> list[int]:
        return sorted(self.grid_model.dataset_row(i) for i in self.grid.selectionModel().selectedIndexes())

    def selected_samples(self) -> list[Sample]:
        d = self.data
        if d is None:
            return []
        out = []
        for r in self.selected_rows():
            pred = d.class_names[d.preds[r]] if d.preds[r] >= 0 else None
            conf = None if np.isnan(d.conf[r]) else float(d.conf[r])
            out.append(Sample(d.paths[r], d.class_names[d.labels[r]], pred, conf, d.index_id))
        return out

    def _update_selection(self) -> None:
        n = len(self.grid.selectionModel().selectedIndexes()) if self.grid.selectionModel() else 0
        self.explain_button.setEnabled(n > 0)
        self.view_button.setEnabled(n > 0)
        self.selection_label.setText(f"{n} selected" if n else "Select images (Ctrl/Shift-click) to explain them.")

    def _grid_menu(self, pos) -> None:
        self._menu = grid_menu(self, pos)  # kept for tests and so that it is not collected while open

    def send_to_analysis(self, name: str, data: str) -> None:
        send_to_analysis(self, name, data)

    def explain_selected(self) -> None:
        samples = self.selected_samples()
        if samples:
            workbench = self.host.show_pane("workbench")
            workbench.set_samples(samples, index_id=self.data.index_id if self.data else None)  # type: ignore

    # -- state ----------------------------------------------------------------------------------------------
    def on_first_shown(self) -> None:
        from ....core.app.jobs.analyses import image_analyses

        handle = self.host.jobs.submit(lambda ctx: image_analyses(), title="Reading the analyses", lane=IO,
                                       visible=False, ask_before_quit=False)
        handle.sig_done.connect(lambda found: setattr(self, "image_analyses", found))
        self.competency.refresh()
        if self._restore_path and self.data is None and self._can_restore(self._restore_path):
            self.open_path(self._restore_path)

    _restore_path: str | None = None

    @staticmethod
    def _can_restore(path: str) -> bool:
        from nemo_desktop.core.data.sources import is_fiftyone_ref

        from .fiftyone_link import unavailable_reason

        return unavailable_reason() is None if is_fiftyone_ref(path) else Path(path).exists()

    def save_state(self, settings: QSettings) -> None:
        settings.setValue("splitter", self.splitter.saveState())
        self.thumbnail_size.save_state(settings)
        if self.dataset_path:
            settings.setValue("dataset", self.dataset_path)

    def restore_state(self, settings: QSettings) -> None:
        state = settings.value("splitter")
        if state is not None:
            self.splitter.restoreState(state)
        self.thumbnail_size.restore_state(settings)
        self._restore_path = settings.value("dataset")


PANE = DatasetBrowserPane
