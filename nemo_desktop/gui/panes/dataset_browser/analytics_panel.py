"""The browser's side panel: the per-class table, the accuracy chart, the confusion matrix and a run's CEI
histogram, as tabs. The charts are linked to the grid: the pane connects their click signals to its filters.
Counts come from the Qt-free core (`core.app.dataset_browser.prediction_counts`); each chart says its n."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QScrollArea, QTabWidget, QVBoxLayout, QWidget

from nemo_desktop.core.app.dataset_browser.prediction_counts import class_counts, confusion_matrix

from ....core.app.dataset_browser.browse_data import BrowseData
from .widgets.accuracy_chart import AccuracyChart
from .widgets.confusion import ConfusionView
from .widgets.run_cei_view import RunCeiView

CEI_TAB = "Run CEI"  # short: "CEI of a run" was cut off in the side panel at 1280 px (issue 28)
CEI_TIP = "CEI of a run: the CEI histogram of a stored benchmark or batch run, per method"


def _page(*widgets, stretch_last: bool = True) -> QWidget:
    page = QWidget()
    layout = QVBoxLayout(page)
    layout.setContentsMargins(4, 4, 4, 4)
    for n, w in enumerate(widgets):
        layout.addWidget(w, 1 if stretch_last and n == len(widgets) - 1 else 0)
    return page


class AnalyticsPanel(QTabWidget):
    sig_cell_clicked = Signal(int, int)  # true class, predicted class
    sig_class_clicked = Signal(int)
    # The panel's width that shows the tab's table whole (the confusion matrix's columns), 0: its own width will do
    sig_width_wanted = Signal(int)

    def __init__(self, classes_page: QWidget, jobs, session, parent=None):
        super().__init__(parent)
        self.setObjectName("browserAnalytics")
        # Every tab title whole: no scroll arrows hiding a tab, no elided title; the panel is at least as wide
        # as its titles (its minimum size says so to the splitter).
        self.setUsesScrollButtons(False)
        self.setElideMode(Qt.TextElideMode.ElideNone)
        self.addTab(classes_page, "Classes")

        self.chart = AccuracyChart()
        self.chart.sig_class_clicked.connect(self.sig_class_clicked)
        self.chart_label = QLabel("")
        self.chart_label.setObjectName("accuracyChartTitle")
        self.chart_label.setWordWrap(True)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.chart)
        self._accuracy_page = _page(self.chart_label, scroll)
        self.addTab(self._accuracy_page, "Accuracy")

        self.confusion = ConfusionView()
        self.confusion.sig_cell_clicked.connect(self.sig_cell_clicked)
        self.confusion_label = QLabel("")
        self.confusion_label.setObjectName("confusionTitle")
        self.confusion_label.setWordWrap(True)
        self._confusion_page = _page(self.confusion_label, self.confusion)
        self.addTab(self._confusion_page, "Confusion")

        self.run_cei = RunCeiView(jobs, session)
        self.setTabToolTip(self.addTab(_page(self.run_cei), CEI_TAB), CEI_TIP)
        self._runs_listed = False
        self._data: BrowseData | None = None
        self._drawn: set[str] = set()  # charts already showing self._data
        self.currentChanged.connect(self._tab_changed)

    def set_data(self, data: BrowseData) -> None:
        """Charts are computed when their tab is shown: a dataset opened or re-indexed costs the GUI thread
        nothing for hidden charts (at 100,000 images and 1,000 classes each one is tens of ms)."""
        self._data, self._drawn = data, set()
        self._tab_changed(self.currentIndex())

    def _draw(self, which: str) -> None:
        data = self._data
        if data is None or which in self._drawn:
            return
        self._drawn.add(which)
        c = len(data.class_names)
        if not data.indexed:
            self.chart.set_counts(None, data.class_names)
            self.confusion.set_counts(np.zeros((0, 0), np.int64), [])  # no predictions: no matrix to show
            for label in (self.chart_label, self.confusion_label):
                label.setText("Index the dataset with the classifier to see its predictions.")
            return
        if which == "accuracy":
            counts = class_counts(data.labels, data.preds, c)
            self.chart.set_counts(counts, data.class_names)
            self.chart_label.setText(f"<b>Accuracy per true class</b>, worst first: n = {int(counts.indexed.sum()):,}"
                                     f" indexed images in {c} classes. Click a bar to show the class.")
        else:
            matrix = confusion_matrix(data.labels, data.preds, c)
            self.confusion.set_counts(matrix, data.class_names)
            self.confusion_label.setText(f"<b>Confusion matrix</b>: n = {int(matrix.sum()):,} indexed images; rows "
                                         "are the true class, columns the prediction. Click a cell to show its "
                                         "images.")

    def _tab_changed(self, i: int) -> None:
        if self.widget(i) is self._accuracy_page:
            self._draw("accuracy")
        elif self.widget(i) is self._confusion_page:
            self._draw("confusion")
        elif self.tabText(i) == CEI_TAB:  # the store's runs are listed again each time the tab is opened
            self._runs_listed = True
            self.run_cei.refresh()
        self.sig_width_wanted.emit(self.confusion_width() if self.widget(i) is self._confusion_page else 0)

    def confusion_width(self) -> int:
        """The panel's width that shows every column of the confusion matrix (0: it already does)."""
        self.confusion.horizontalHeader().doItemsLayout()  # the columns as widened to their header words
        extra = self.confusion.full_width() - self.confusion.width()
        return self.width() + extra if extra > 0 else 0
