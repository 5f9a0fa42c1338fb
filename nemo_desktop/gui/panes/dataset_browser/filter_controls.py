"""The browser's filter rows (correctness, true and predicted class, confidence range, order) and its side
panel (per-class accuracy table and the analytics tabs), built onto the pane: the pane keeps the widgets as
attributes, as before; this module only keeps its constructor short."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDoubleSpinBox, QHBoxLayout, QHeaderView, QLabel,
                               QPushButton, QTableView, QVBoxLayout, QWidget)

from ...widgets.table_columns import keep_header_words_whole
from .analytics_panel import AnalyticsPanel
from .filters import CORRECTNESS, ORDERS
from .widgets.class_table import ClassAccuracyModel


def build_filter_rows(pane) -> tuple[QHBoxLayout, QHBoxLayout]:
    """The class filter row and the confidence/order row; filters apply a moment after the last change."""
    pane.correctness_combo = QComboBox()
    pane.correctness_combo.setObjectName("correctnessFilter")
    for text, value in CORRECTNESS:
        pane.correctness_combo.addItem(text, value)
    pane.true_combo = QComboBox()
    pane.true_combo.setObjectName("trueClassFilter")
    pane.pred_combo = QComboBox()
    pane.pred_combo.setObjectName("predClassFilter")
    for combo in (pane.true_combo, pane.pred_combo):
        combo.setMinimumContentsLength(10)
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    pane.conf_min = QDoubleSpinBox()
    pane.conf_max = QDoubleSpinBox()
    for spin, value in ((pane.conf_min, 0.0), (pane.conf_max, 1.0)):
        spin.setRange(0.0, 1.0)
        spin.setSingleStep(0.05)
        spin.setDecimals(2)
        spin.setValue(value)
    pane.conf_min.setObjectName("confMin")
    pane.conf_max.setObjectName("confMax")
    pane.order_combo = QComboBox()
    pane.order_combo.setObjectName("orderCombo")
    for text, value in ORDERS:
        pane.order_combo.addItem(text, value)
    pane.order_combo.setToolTip("Confidence is the classifier's probability of its prediction")
    pane.mistakes_button = QPushButton("Most confident mistakes")
    pane.mistakes_button.setObjectName("confidentMistakesButton")
    pane.mistakes_button.setToolTip("Misclassified images, the most confident prediction first")
    pane.mistakes_button.clicked.connect(pane.show_confident_mistakes)
    pane.count_label = QLabel("")
    pane.count_label.setObjectName("shownCount")
    # Filters apply a moment after the last change, so typing into a spin box filters once.
    pane._filter_timer = QTimer(pane, singleShot=True, interval=120)
    pane._filter_timer.timeout.connect(pane.apply_filters)
    for combo in (pane.correctness_combo, pane.true_combo, pane.pred_combo, pane.order_combo):
        combo.currentIndexChanged.connect(lambda _i: pane._filter_timer.start())
    for spin in (pane.conf_min, pane.conf_max):
        spin.valueChanged.connect(lambda _v: pane._filter_timer.start())
    filters = QHBoxLayout()
    for w in (QLabel("Show:"), pane.correctness_combo, QLabel("True:"), pane.true_combo,
              QLabel("Predicted:"), pane.pred_combo):
        filters.addWidget(w)
    filters.addStretch(1)
    confidence = QHBoxLayout()
    for w in (QLabel("Confidence:"), pane.conf_min, QLabel("to"), pane.conf_max, QLabel("Sort:"),
              pane.order_combo, pane.mistakes_button):
        confidence.addWidget(w)
    confidence.addStretch(1)
    confidence.addWidget(pane.count_label)

    return filters, confidence


def build_side_panel(pane, host) -> AnalyticsPanel:
    """The per-class accuracy table inside the analytics tabs (whose charts set the grid's filters)."""
    pane.class_model = ClassAccuracyModel(pane)  # sorts itself (no proxy: see its sort())
    pane.class_table = QTableView()
    pane.class_table.setObjectName("classAccuracy")
    pane.class_table.setModel(pane.class_model)
    pane.class_table.setSortingEnabled(True)
    pane.class_table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
    pane.class_table.verticalHeader().hide()
    pane.class_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    pane.class_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    # Fixed widths: sizing columns to their contents would ask for every row of a 1000-class table.
    header = pane.class_table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    for col, sample in ((1, " Images "), (2, " Correct "), (3, " Accuracy ")):
        header.resizeSection(col, pane.fontMetrics().horizontalAdvance(sample + "00") + 8)
    pane.class_table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
    keep_header_words_whole(pane.class_table)
    pane.class_table.verticalHeader().setDefaultSectionSize(pane.fontMetrics().height() + 6)
    pane.class_table.clicked.connect(pane._class_clicked)
    pane.class_table.setToolTip("Click a class to show its images")
    pane.accuracy_label = QLabel("")
    pane.accuracy_label.setObjectName("overallAccuracy")
    classes = QWidget()
    sv = QVBoxLayout(classes)
    sv.setContentsMargins(0, 0, 0, 0)
    sv.addWidget(QLabel("<b>Per-class accuracy</b>"))
    sv.addWidget(pane.accuracy_label)
    sv.addWidget(pane.class_table, 1)
    # Charts linked to the grid: a confusion cell or an accuracy bar sets the filters to its images.
    side = pane.analytics = AnalyticsPanel(classes, host.jobs, host.session)
    pane.analytics.sig_cell_clicked.connect(pane.show_confusion_cell)
    pane.analytics.sig_class_clicked.connect(pane.show_class)

    return side
