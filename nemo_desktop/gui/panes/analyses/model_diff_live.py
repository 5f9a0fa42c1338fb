"""Model differences, live: Optimization's iterations as they finish, on the Analyses page while `model-diff` runs.

The pipeline reports each finished iteration as a partial result ({"kind": "model-diff-iteration", "record":
IterationRecord}, core/analyses/model_diff/pipeline.py); this panel adds it as a row of a table (iteration, the
candidates written, the best score kept, what was kept) and as a point of a best-score curve. When the result
arrives its full record replaces the live one (a resumed run's stored iterations are not re-reported live).

The curve is painted with QPainter (PySide6-Essentials has no QtCharts; matplotlib would be a large dependency
for one line). The best score of iteration t is measured on the conditions explored up to t (|C_t|, in the
table), which grow, so the curve may go down when new conditions expose a weakness: that is what it measures.
"""
from __future__ import annotations

from typing import Any, Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (QAbstractItemView, QGroupBox, QHBoxLayout, QHeaderView, QSizePolicy, QTableWidget,
                               QTableWidgetItem, QWidget)

from ...widgets.table_columns import keep_header_words_whole

ITERATION_KIND = "model-diff-iteration"
COLUMNS = ("t", "Candidates", "|C_t|", "Best score", "Kept")
TIPS = ("Iteration (t = 0: the initial summaries)", "Candidate explanations readable / written by the explainer",
        "Conditions explored so far: the n the scores of this iteration are measured on",
        "The best kept candidate's score on the |C_t| conditions", "The candidates kept in the beam, best first")
LINE = QColor(31, 111, 235)


def iteration_row(record: Any) -> list[str]:
    """The table's cells for one IterationRecord (t = 0: the initial summaries)."""
    written = record.candidates
    readable = sum(c.error is None for c in written)
    best = "—" if record.best_objective is None else f"{record.best_objective:+.3f}"
    return [str(record.t), f"{readable}/{len(written)}", str(record.n_conditions), best, ", ".join(record.beam)]


class BestScoreCurve(QWidget):
    """The best score kept after each iteration: a line through (t, score), with the score range on the axis."""

    MARGIN = 8

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("bestScoreCurve")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(160, 90)
        self.points: list[tuple[int, float]] = []

    def set_points(self, points: Sequence[tuple[int, float]]) -> None:
        self.points = sorted(points)
        self.setToolTip("Best score kept per iteration: " + ", ".join(f"t={t}: {v:+.3f}" for t, v in self.points))
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(240, 120)

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = self.fontMetrics()
        if not self.points:
            p.setPen(self.palette().placeholderText().color())
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "The best score per iteration shows here.")
            return
        values = [v for _, v in self.points]
        lo, hi = min(values), max(values)
        if hi - lo < 1e-9:
            lo, hi = lo - 0.5, hi + 0.5
        label_w = fm.horizontalAdvance("+0.000") + 6
        m = self.MARGIN
        plot = QRectF(m + label_w, m, max(10, self.width() - label_w - 2 * m),
                      max(10, self.height() - fm.height() - 2 * m))
        p.setPen(self.palette().mid().color())
        p.drawRect(plot)
        p.setPen(self.palette().text().color())
        right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        p.drawText(QRectF(m, plot.top() - fm.height() / 2, label_w - 4, fm.height()), right, f"{hi:+.3f}")
        p.drawText(QRectF(m, plot.bottom() - fm.height() / 2, label_w - 4, fm.height()), right, f"{lo:+.3f}")
        t0, t1 = self.points[0][0], self.points[-1][0]
        span = max(1, t1 - t0)

        def at(t: int, v: float) -> QPointF:
            return QPointF(plot.left() + plot.width() * (t - t0) / span,
                           plot.bottom() - plot.height() * (v - lo) / (hi - lo))

        below = QRectF(plot.left(), plot.bottom() + 2, plot.width(), fm.height())
        p.drawText(below, Qt.AlignmentFlag.AlignLeft, f"t={t0}")
        if t1 != t0:
            p.drawText(below, Qt.AlignmentFlag.AlignRight, f"t={t1}")
        path = QPainterPath(at(*self.points[0]))
        for t, v in self.points[1:]:
            path.lineTo(at(t, v))
        p.setPen(QPen(LINE, 2))
        p.drawPath(path)
        p.setBrush(LINE)
        for t, v in self.points:
            p.drawEllipse(at(t, v), 3, 3)


class ModelDiffLivePanel(QGroupBox):
    """The iteration table and the best-score curve of one model-diff run."""

    def __init__(self, parent=None) -> None:
        super().__init__("Optimization, live", parent)
        self.setObjectName("modelDiffLive")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("modelDiffIterations")
        for j, (name, tip) in enumerate(zip(COLUMNS, TIPS)):
            header = QTableWidgetItem(name)
            header.setToolTip(tip)
            self.table.setHorizontalHeaderItem(j, header)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        keep_header_words_whole(self.table)
        self.curve = BestScoreCurve()
        layout = QHBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.curve, 1)
        self.setMaximumHeight(220)
        self._records: dict[int, Any] = {}

    def start(self, objective: str | None = None) -> None:
        """A new run: empty table and curve; the score column names the objective being maximised."""
        self._records = {}
        what = {"completeness": "Completeness", "completeness+density": "Completeness + Density"}.get(objective or "")
        self.table.horizontalHeaderItem(3).setToolTip(
            TIPS[3] + (f" (the objective: {what})" if what else ""))
        self._refresh()

    def on_partial(self, item: Any) -> None:
        """A partial result of the run: an iteration record is shown, anything else is not this panel's."""
        if isinstance(item, dict) and item.get("kind") == ITERATION_KIND:
            record = item["record"]
            self._records[record.t] = record
            self._refresh()

    def show_records(self, records: Sequence[Any]) -> None:
        """The finished run's records (all of them, also those a resumed run loaded from the store)."""
        self._records = {r.t: r for r in records}
        self._refresh()

    def rows(self) -> int:
        return self.table.rowCount()

    def _refresh(self) -> None:
        records = [self._records[t] for t in sorted(self._records)]
        self.table.setRowCount(len(records))
        for i, record in enumerate(records):
            for j, text in enumerate(iteration_row(record)):
                cell = QTableWidgetItem(text)
                if j < 4:
                    cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, cell)
        if records:
            self.table.scrollToBottom()
        self.curve.set_points([(r.t, r.best_objective) for r in records if r.best_objective is not None])
