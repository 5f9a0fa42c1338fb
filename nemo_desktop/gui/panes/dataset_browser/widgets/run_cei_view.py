"""The CEI histogram of a stored run (benchmark or batch), drawn by the run report's own SVG code.

The bins are `core.reports.runs.cei_histogram`'s and the drawing is `core.reports.html.histogram_svg`'s,
rendered by QtSvg (part of PySide6-Essentials): the app and the HTML report show the same chart for the same
run, with no plotting library added. Reading a run's results is a job on the I/O lane.
"""
from __future__ import annotations

from PySide6.QtCore import QByteArray, Qt, Signal
from PySide6.QtSvgWidgets import QSvgWidget
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from nemo_desktop.core.app.dataset_browser.run_cei import RunCEI, run_cei
from nemo_desktop.core.reports.html import histogram_svg

from ....jobs import IO, JobHandle


def describe(r: RunCEI) -> str:
    methods = len(r.values)
    parts = [f"n = {r.n} result(s) with a CEI" + (f" over {methods} methods" if methods > 1 else ""),
             f"of {r.items} item(s) in the run"]
    if r.without_cei:
        parts.append(f"{r.without_cei} without a CEI (no candidate scored)")
    if r.skipped:
        parts.append(f"{r.skipped} skipped by design")
    if r.failed:
        parts.append(f"{r.failed} failed or missing")
    return "; ".join(parts) + "."


class RunCeiView(QWidget):
    sig_shown = Signal(object)  # RunCEI

    def __init__(self, jobs, session, parent=None):
        super().__init__(parent)
        self.jobs, self.session = jobs, session
        self.shown: RunCEI | None = None
        self.run_combo = QComboBox()
        self.run_combo.setObjectName("ceiRunCombo")
        self.run_combo.setMinimumContentsLength(10)
        self.run_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.run_combo.activated.connect(lambda _i: self.load(self.run_combo.currentData()))
        refresh = QPushButton("Refresh")
        refresh.setToolTip("List the runs in the results store again")
        refresh.clicked.connect(self.refresh)
        self.summary = QLabel("Runs of `nemo bench` and batch diagnoses appear here.")
        self.summary.setObjectName("ceiSummary")
        self.summary.setWordWrap(True)
        self.chart = QSvgWidget()
        self.chart.setObjectName("ceiHistogram")
        self.chart.setMinimumHeight(50)  # the pane must still fit a small window (the chart keeps its aspect)
        top = QHBoxLayout()
        top.addWidget(QLabel("Run:"))
        top.addWidget(self.run_combo, 1)
        top.addWidget(refresh)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addWidget(self.chart, 1)

    def refresh(self) -> JobHandle:
        """List the store's runs (newest first) and show the selected, else the newest, one."""
        session = self.session
        handle = self.jobs.submit(lambda ctx: session.store().list_runs(), title="Listing runs", lane=IO,
                                  ask_before_quit=False, visible=False)
        handle.sig_done.connect(self._listed)
        return handle

    def _listed(self, runs: list[dict]) -> None:
        keep = self.run_combo.currentData()
        known = {self.run_combo.itemData(i) for i in range(self.run_combo.count())}
        if runs and known and runs[0]["run_id"] not in known:
            keep = runs[0]["run_id"]  # a run finished since the last listing (a batch just run): show it
        self.run_combo.clear()
        for r in runs:
            self.run_combo.addItem(f"{r['run_id']} · {r.get('kind') or 'run'} · {r.get('status') or '—'}", r["run_id"])
        if not runs:
            self.summary.setText("No runs in the results store yet: runs of `nemo bench` and batch diagnoses "
                                 "appear here.")
            self.chart.load(QByteArray())
            return
        i = max(0, self.run_combo.findData(keep))
        self.run_combo.setCurrentIndex(i)
        self.load(self.run_combo.itemData(i))

    def load(self, run_id: str | None) -> JobHandle | None:
        if not run_id:
            return None
        session = self.session
        self.summary.setText(f"Reading run {run_id}…")
        handle = self.jobs.submit(lambda ctx: run_cei(session.store(), run_id, ctx), title=f"CEI of run {run_id}",
                                  lane=IO, ask_before_quit=False)
        handle.sig_done.connect(self.show_cei)
        return handle

    def show_cei(self, r: RunCEI) -> None:
        if self.run_combo.currentData() not in (None, r.run_id):
            return  # another run was chosen meanwhile
        self.shown = r
        hist = r.histogram()
        self.summary.setText(f"Run {r.run_id}: " + describe(r))
        self.chart.load(QByteArray(histogram_svg(hist).encode()) if hist else QByteArray())
        self.chart.renderer().setAspectRatioMode(Qt.AspectRatioMode.KeepAspectRatio)  # load() resets it
        self.chart.setToolTip("" if hist else "No result of this run has a CEI.")
        self.sig_shown.emit(r)
