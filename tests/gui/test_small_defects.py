"""Small defects of issue 19, one test each."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea, QSpinBox

pytestmark = pytest.mark.gui


def wheel(widget, steps: int = -3) -> None:
    pos = QPointF(widget.rect().center())
    event = QWheelEvent(pos, QPointF(widget.mapToGlobal(pos.toPoint())), QPoint(0, 0), QPoint(0, 120 * steps),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_wheel_over_settings_scrolls_the_form_and_leaves_values_alone(qtbot):
    from nemo_desktop.core.methods.scitx import SciTXConfig
    from nemo_desktop.gui.panes.workbench.widgets.method_form import MethodForm

    form = MethodForm()
    form.set_config(SciTXConfig)
    area = QScrollArea()
    area.setWidget(form)
    area.setWidgetResizable(True)
    area.resize(300, 120)  # shorter than the form: it scrolls
    qtbot.addWidget(area)
    area.show()
    qtbot.waitExposed(area)
    spin = form.editors["k"][1]
    assert isinstance(spin, QSpinBox) and spin.focusPolicy() == Qt.FocusPolicy.StrongFocus
    before, bar = spin.value(), area.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    wheel(spin)
    assert spin.value() == before  # not focused: the value stays
    assert bar.value() > 0  # the form scrolled instead
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus, timeout=2000)
    wheel(spin, steps=1)
    assert spin.value() != before  # a focused spin box still takes the wheel


def test_model_manager_right_column_is_not_clipped_at_the_default_size(qtbot, make_window):
    window = make_window()
    window.resize(1200, 800)
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("model_manager")
    right = pane.splitter.widget(1)
    inner = right.widget()

    def fits() -> bool:
        return right.viewport().width() >= inner.minimumSizeHint().width() and inner.width() <= \
            right.viewport().width()

    qtbot.waitUntil(fits, timeout=5000)
    pane.splitter.setSizes([1150, 30])  # dragged narrow: it scrolls sideways instead of clipping
    qtbot.waitUntil(lambda: right.horizontalScrollBar().isVisible(), timeout=5000)
    window.resize(1000, 700)  # a smaller window still fits the column when the catalog side has room
    qtbot.waitUntil(fits, timeout=5000)


def test_class_table_selection_follows_the_class_after_a_sort(qtbot):
    from PySide6.QtCore import QItemSelectionModel
    from PySide6.QtWidgets import QAbstractItemView, QTableView

    from nemo_desktop.gui.panes.dataset_browser.filters import ClassAccuracy
    from nemo_desktop.gui.panes.dataset_browser.widgets.class_table import CLASS_ROLE, ClassAccuracyModel

    model = ClassAccuracyModel()
    model.set_rows([ClassAccuracy(i, name, 10, correct) for i, (name, correct) in
                    enumerate([("ant", 9), ("bee", 2), ("cat", 5), ("dog", 7)])], indexed=True)
    view = QTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSortingEnabled(True)
    view.sortByColumn(0, Qt.SortOrder.AscendingOrder)  # by name: ant, bee, cat, dog
    assert model.data(model.index(1, 0), CLASS_ROLE) == 1
    view.selectionModel().select(model.index(1, 0), QItemSelectionModel.SelectionFlag.ClearAndSelect
                                 | QItemSelectionModel.SelectionFlag.Rows)
    view.selectionModel().setCurrentIndex(model.index(1, 0), QItemSelectionModel.SelectionFlag.NoUpdate)
    view.sortByColumn(3, Qt.SortOrder.DescendingOrder)  # by accuracy: bee (20 %) moves to the last row
    selected = {i.row() for i in view.selectionModel().selectedIndexes()}
    assert selected == {3} and model.data(model.index(3, 0), CLASS_ROLE) == 1
    assert view.selectionModel().currentIndex().row() == 3


def _stored_result(store, key="r1", cei=12.5):
    from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, SampleInfo

    top = [ClassScore(1, "eight", 0.9)]
    r = ExplanationResult("scitx", SampleInfo("/data/a very long folder name/query_image_of_a_three.png", "abc", 0,
                                              "three", 1, "eight", 0.1, 0.9, top),
                          explanation="The blue ink.", selected_index=0, cei=cei,
                          candidates=[Candidate("The blue ink.", cei=cei)],
                          manifest={"models": {"classifier": {"id": "digits-cnn"}, "mllm": {"id": "qwen2.5-vl-7b"},
                                               "editor": {"id": "flux-kontext"}}})
    store.put(key, "explanation", r.to_dict())


def test_past_results_show_the_cei_and_the_models(qtbot, make_window):
    window = make_window()
    window.resize(1200, 800)
    window.show()
    qtbot.waitExposed(window)
    _stored_result(window.session.store())
    pane = window.show_pane("workbench")
    table = pane.past_table
    qtbot.waitUntil(lambda: table.rowCount() == 1, timeout=10000)
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers == ["Date", "CEI", "True → predicted", "Method", "Image", "Classifier", "MLLM", "Editor"]
    assert [table.item(0, c).text() for c in (1, 5, 6, 7)] == ["+12.5", "digits-cnn", "qwen2.5-vl-7b", "flux-kontext"]
    QApplication.processEvents()
    cei_right = table.columnViewportPosition(1) + table.columnWidth(1)
    assert 0 <= table.columnViewportPosition(1) and cei_right <= table.viewport().width()  # fully visible
    assert table.columnWidth(1) >= table.fontMetrics().horizontalAdvance("+12.5")


def test_batch_run_progress_bar_shows_the_whole_run(qtbot, digits_window, digits_reference, blue_three, tmp_path):
    from PIL import Image

    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.app.samples import Sample

    window = digits_window
    index = build_index(digits_reference, window.session.get("classifier"), window.session.store())
    second = tmp_path / "blue_three_b.png"
    img = Image.open(blue_three).convert("RGB")
    img.putpixel((0, 0), (254, 254, 254))  # another image (another hash), still misclassified
    img.save(second)
    window.show()
    pane = window.show_pane("workbench")
    qtbot.waitUntil(lambda: bool(pane.methods), timeout=20000)
    pane.form.set_value("k", 1)
    pane.form.set_value("m", 2)
    pane.set_samples([Sample(str(blue_three), "three"), Sample(str(second), "three")], index_id=index.index_id)
    qtbot.waitUntil(lambda: pane.reference_combo.currentData() == index.index_id, timeout=10000)
    seen: list[tuple[str, int]] = []
    handle = pane.run()
    handle.sig_progress.connect(lambda p: seen.append((p.stage, pane.progress.value(), pane.progress.maximum())))
    qtbot.waitUntil(lambda: handle.state == "done", timeout=120000)
    bar = [(stage, v) for stage, v, mx in seen if mx == 1000]
    assert any(s.startswith("Image 2 of 2") for s, _ in bar)
    values = [v for _, v in bar]
    assert values == sorted(values), "the bar never goes back: it shows the whole run, not each stage"
    assert all(v >= 500 for s, v in bar if s.startswith("Image 2 of 2"))
    assert all(v <= 550 for s, v in bar if s.startswith("Image 1 of 2"))


def test_status_bar_counts_failed_rows_until_they_are_dismissed(qtbot, make_window):
    from gui_job_functions import fail_to_load

    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    handle = window.jobs.submit(fail_to_load, title="Loading a classifier")
    qtbot.waitUntil(lambda: handle.state == "failed", timeout=5000)
    row = window.jobs_panel.rows[handle.job_id]
    qtbot.waitUntil(lambda: window.jobs_summary.text() == "No jobs running; 1 failed (see the jobs list)",
                    timeout=5000)
    assert row.stage.text() == "Failed" and row.cancel_button.text() == "Dismiss" and row.cancel_button.isEnabled()
    qtbot.wait(100)
    assert handle.job_id in window.jobs_panel.rows  # a failed row stays listed
    qtbot.mouseClick(row.cancel_button, Qt.MouseButton.LeftButton)
    assert handle.job_id not in window.jobs_panel.rows
    assert "failed" not in window.jobs_summary.text()
    qtbot.waitUntil(lambda: window.jobs_summary.text() == "No jobs running", timeout=10000)  # startup jobs end
