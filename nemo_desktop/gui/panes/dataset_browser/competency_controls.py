"""The dataset browser's competency row: pick a stored estimator of the loaded classifier, score the dataset
(GPU lane, progress, cancel), then filter ("competency at most") and sort ("least competent first").

Scores come from the `competency-score` analysis and are stored; a dataset scored before shows its column as soon
as it is opened (looked up on the I/O lane; nothing is scored without the user asking).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QWidget

from nemo_desktop.core.app.worker.protocol import JobSpec

from ...jobs import GPU, IO, JobHandle
from ...widgets.buttons import action_button
from ....core.app.dataset_browser.browse_data import BrowseData
from ....core.app.jobs.competency_column import CompetencyColumn, find_estimators

if TYPE_CHECKING:
    from .plugin import DatasetBrowserPane

THRESHOLD = 0.9  # the reference's competency threshold: below it an image is "low competency"


class CompetencyControls(QObject):
    sig_column_changed = Signal(object)  # CompetencyColumn or None
    sig_filter_changed = Signal()

    def __init__(self, pane: "DatasetBrowserPane"):
        super().__init__(pane)
        self.pane = pane
        self.column: CompetencyColumn | None = None
        self._score_job: JobHandle | None = None

        self.estimator_combo = QComboBox()
        # Long estimator labels must not widen the pane (its minimum width is the widest row's): elide them.
        self.estimator_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.estimator_combo.setMinimumContentsLength(12)
        self.estimator_combo.setObjectName("competencyEstimator")
        self.estimator_combo.setToolTip("Competency estimators stored for the loaded classifier (fit one under "
                                        "Analyses ▸ competency-estimator)")
        self.estimator_combo.currentIndexChanged.connect(lambda _i: self._estimator_changed())
        self.score_button = action_button(
            "Score competency", self.score, "Competency of every image of the dataset with the chosen estimator "
            "(stored: a dataset scored before is read back)", "scoreCompetencyButton")
        self.max_spin = QDoubleSpinBox()
        self.max_spin.setObjectName("competencyMax")
        self.max_spin.setRange(0.0, 1.0)
        self.max_spin.setSingleStep(0.05)
        self.max_spin.setDecimals(3)  # competencies crowd near 1
        self.max_spin.setValue(1.0)
        self.max_spin.setToolTip("Show only images whose competency is at most this (1 shows all)")
        self.least_first = QCheckBox("Least competent first")
        self.least_first.setObjectName("leastCompetentFirst")
        self.max_spin.valueChanged.connect(lambda _v: self.sig_filter_changed.emit())
        self.least_first.toggled.connect(lambda _v: self.sig_filter_changed.emit())
        self.status = QLabel("")
        self.status.setObjectName("competencyStatus")

        self.bar = QWidget()
        row = QHBoxLayout(self.bar)
        row.setContentsMargins(0, 0, 0, 0)
        for w in (QLabel("Competency:"), self.estimator_combo, self.score_button, QLabel("at most"),
                  self.max_spin, self.least_first, self.status):
            row.addWidget(w)
        row.addStretch(1)
        self._set_estimators([])

    # -- estimators of the loaded classifier --------------------------------------------------------------
    def refresh(self) -> JobHandle:
        session = self.pane.host.session
        handle = self.pane.host.jobs.submit(lambda ctx: find_estimators(session),
                                            title="Looking for competency estimators", lane=IO, visible=False,
                                            ask_before_quit=False, report_errors=False)
        handle.sig_done.connect(self._set_estimators)
        return handle

    def _set_estimators(self, choices: list) -> None:
        current = self.estimator_combo.currentData()
        self.estimator_combo.blockSignals(True)
        self.estimator_combo.clear()
        for key, label in choices:
            self.estimator_combo.addItem(label, key)
        if not choices:
            self.estimator_combo.addItem("(none stored)", None)  # the tooltip says for which classifier
        i = self.estimator_combo.findData(current) if current else -1
        self.estimator_combo.setCurrentIndex(max(i, 0))
        self.estimator_combo.blockSignals(False)
        if self.column is not None and self.column.estimator_key != self.estimator_key:
            self.set_column(None)  # another classifier was loaded: its estimator's scores are not these
        self._update_enabled()
        if self.estimator_key and self.column is None:
            self.look_up_stored()

    @property
    def estimator_key(self) -> str | None:
        return self.estimator_combo.currentData()

    def _estimator_changed(self) -> None:
        self.set_column(None)
        self._update_enabled()
        if self.estimator_key:
            self.look_up_stored()

    def _update_enabled(self) -> None:
        running = self._score_job is not None and self._score_job.active
        ready = self.estimator_key is not None and self.pane.data is not None
        self.score_button.setEnabled(ready and not running)
        scored = self.column is not None
        self.max_spin.setEnabled(scored)
        self.least_first.setEnabled(scored)

    # -- the column ---------------------------------------------------------------------------------------
    def dataset_shown(self, data: BrowseData) -> None:
        """A dataset was (re)shown: attach the column when it covers its images, else look for a stored one."""
        self.attach(data)
        if self.column is not None and len(data) and np.isnan(data.competency).all():  # another dataset
            self.set_column(None)
        self._update_enabled()
        if self.column is None and self.estimator_key:
            self.look_up_stored()

    def attach(self, data: BrowseData | None) -> None:
        if data is None:
            return
        if self.column is None:
            data.competency = data.competency_parts = None
            return
        comp, conf, pid = self.column.arrays(data.paths)
        data.competency = comp
        data.competency_parts = np.stack([conf, pid], axis=1)
        data.competency_threshold = self.column.threshold

    def set_column(self, column: CompetencyColumn | None) -> None:
        self.column = column
        self.attach(self.pane.data)
        if column is None:
            self.status.setText("")
        else:
            failed = f", {len(column.failed)} unreadable" if column.failed else ""
            self.status.setText(f"{column.n:,} scored, {column.low_text()}{failed}")
        self._update_enabled()
        self.sig_column_changed.emit(column)

    def _paths(self) -> list[str] | None:
        data = self.pane.data
        # Sorted: the stored result is keyed by the images in order, and an indexed dataset lists them by class.
        return None if data is None or not len(data) else sorted(str(p) for p in data.paths.tolist())

    def _column_job(self, function: str, key: str | None, title: str, **submit) -> JobHandle | None:
        """A model job (the estimator is bound to the classifier, which is in the model worker in worker mode):
        `app_jobs.competency_column.<function>` over the dataset's images; None without images or estimator."""
        paths = self._paths()
        if paths is None or key is None:
            return None
        return self.pane.host.jobs.submit(JobSpec(f"nemo_desktop.core.app.jobs.competency_column:{function}",
                                                  (key, list(paths), THRESHOLD)), title=title, **submit)

    def look_up_stored(self) -> JobHandle | None:
        key = self.estimator_key
        handle = self._column_job("stored_column", key, "Looking for stored competency scores", lane=IO,
                                  visible=False, ask_before_quit=False, report_errors=False)
        if handle is not None:
            handle.sig_done.connect(lambda col: col is not None and key == self.estimator_key and self.set_column(col))
        return handle

    def score(self) -> JobHandle | None:
        key = self.estimator_key
        handle = self._column_job("score_column", key, "Scoring competency", lane=GPU)
        if handle is None:
            return None
        self._score_job = handle
        self.status.setText("Scoring…")
        handle.sig_progress.connect(lambda p: self.status.setText(
            f"{p.stage}: {p.done}/{p.total}" if p.total else p.stage))
        handle.sig_done.connect(lambda col: key == self.estimator_key and self.set_column(col))
        handle.sig_finished.connect(lambda o: (o.status != "done" and self.status.setText(
            "Scoring cancelled." if o.status == "cancelled" else "Scoring failed (see the message)."),
            self._update_enabled()))
        self._update_enabled()
        return handle
