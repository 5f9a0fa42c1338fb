"""Dataset browser analytics, offscreen, on a real indexed folder (the digits CNN, with blue threes that it takes
for eights): a confusion cell and an accuracy bar clicked filter the grid to exactly their images, the most
confident mistakes come first, and a stored run's CEI histogram says its n."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from nemo_desktop.core.app.dataset_browser.prediction_counts import confusion_matrix, most_confident_mistakes

pytestmark = pytest.mark.gui


@pytest.fixture
def indexed(qtbot, digits_window, digits_reference, blue_three, tmp_path):
    """The browser showing an indexed copy of the reference digits plus blue threes (misclassified)."""
    folder = tmp_path / "digits"
    shutil.copytree(digits_reference, folder)
    for k in range(3):
        shutil.copy(blue_three, folder / "three" / f"blue_{k}.png")
    digits_window.resize(1280, 860)
    digits_window.show()
    qtbot.waitExposed(digits_window)
    pane = digits_window.show_pane("dataset_browser")
    with qtbot.waitSignal(pane.sig_opened, timeout=20000):
        pane.open_path(folder)
    # Before indexing there are no predictions: the charts say so. The confusion tab stays open while the
    # dataset is indexed, so the tests also see the open chart refreshed by the new data.
    _tab(pane, "Confusion")
    assert pane.analytics.confusion.model().rowCount() == 0
    assert "Index the dataset" in pane.analytics.confusion_label.text()
    assert not pane.mistakes_button.isEnabled() and not pane.order_combo.isEnabled()
    with qtbot.waitSignal(pane.sig_opened, timeout=60000) as opened:
        pane.index_dataset()
    data = opened.args[0]
    assert data.indexed and len(data) == 53
    return pane, data


def _tab(pane, title):
    tabs = pane.analytics
    tabs.setCurrentIndex(next(i for i in range(tabs.count()) if tabs.tabText(i) == title))


def test_clicking_a_confusion_cell_shows_exactly_its_images(qtbot, indexed):
    pane, data = indexed
    _tab(pane, "Confusion")
    view = pane.analytics.confusion
    counts = confusion_matrix(data.labels, data.preds, len(data.class_names))
    assert np.array_equal(view.confusion.counts, counts)
    assert f"n = {len(data)}" in pane.analytics.confusion_label.text()
    three, eight = data.class_names.index("three"), data.class_names.index("eight")
    assert counts[three, eight] >= 3  # the blue threes
    for i, j in ((three, eight), (three, three)):
        index = view.model().index(i, j)
        view.scrollTo(index)
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(index).center())
        assert pane.grid_model.rowCount() == counts[i, j]
        rows = pane.grid_model.rows
        assert set(data.labels[rows].tolist()) == {i} and set(data.preds[rows].tolist()) == {j}
        assert pane.true_combo.currentData() == i and pane.pred_combo.currentData() == j


def test_clicking_an_accuracy_bar_shows_that_class(qtbot, indexed):
    pane, data = indexed
    _tab(pane, "Accuracy")
    chart = pane.analytics.chart
    three = data.class_names.index("three")
    assert int(chart.order[0]) == three  # worst first: the blue threes
    pane.set_filter(correctness="misclassified", conf_min=0.5)  # a bar click clears these
    QTest.mouseClick(chart, Qt.MouseButton.LeftButton, pos=chart.bar_rect(three).center())
    assert pane.grid_model.rowCount() == int((data.labels == three).sum()) == 8
    assert set(data.labels[pane.grid_model.rows].tolist()) == {three}
    assert f"n = {len(data)} indexed images in 10 classes" in pane.analytics.chart_label.text()


def test_most_confident_mistakes_come_first(qtbot, indexed):
    pane, data = indexed
    pane.mistakes_button.click()
    rows = pane.grid_model.rows
    assert len(rows) == int((data.preds != data.labels).sum()) >= 3
    assert np.all(data.preds[rows] != data.labels[rows])
    assert np.all(np.diff(data.conf[rows]) <= 0)
    assert rows.tolist() == most_confident_mistakes(data.labels, data.preds, data.conf).tolist()
    pane.order_combo.setCurrentIndex(pane.order_combo.findData("confidence-asc"))
    qtbot.waitUntil(lambda: np.all(np.diff(data.conf[pane.grid_model.rows]) >= 0), timeout=3000)


def test_cei_histogram_of_a_stored_run_says_its_n(qtbot, indexed):
    from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, SampleInfo

    pane, _ = indexed
    store = pane.host.session.store()
    run = store.create_run("batch", {"dataset": "digits"})
    for i, cei in enumerate([12.5, -3.0, 40.0, 8.0]):
        r = ExplanationResult("scitx", SampleInfo(f"/d/{i}.png", f"h{i}", 3, "three", 8, "eight", 0.1, 0.9,
                                                  [ClassScore(8, "eight", 0.9)]),
                              explanation="The blue ink.", selected_index=0, cei=cei,
                              candidates=[Candidate("The blue ink.", cei=cei)])
        store.put(f"k{i}", "explanation", r.to_dict())
        store.add_run_item(run, f"s{i}", f"k{i}", "done")
    store.add_run_item(run, "failed", None, "error", {"message": "The MLLM crashed."})
    view = pane.analytics.run_cei
    with qtbot.waitSignal(view.sig_shown, timeout=10000) as shown:
        _tab(pane, "Run CEI")  # the first visit lists the runs and shows the newest
    assert shown.args[0].run_id == run and shown.args[0].n == 4
    assert "n = 4 result(s) with a CEI" in view.summary.text() and "1 failed or missing" in view.summary.text()
    assert view.chart.renderer().isValid()
    assert view.chart.renderer().aspectRatioMode() == Qt.AspectRatioMode.KeepAspectRatio  # not stretched


def test_filter_order_by_confidence_and_none_without_predictions():
    from nemo_desktop.core.app.dataset_browser.browse_data import BrowseData
    from nemo_desktop.gui.panes.dataset_browser.filters import (CONFIDENCE_ASC, CONFIDENCE_DESC, MISCLASSIFIED,
                                                                FilterSpec, filter_rows)

    paths = np.array([f"/d/{i}.png" for i in range(5)], object)
    labels, preds = np.array([0, 0, 1, 1, 1]), np.array([1, 0, 0, 1, 0])
    conf = np.array([0.6, 0.9, 0.95, 0.7, 0.3], np.float32)
    data = BrowseData("/d", ["a", "b"], paths, labels, preds, conf, conf, index_id="i")
    assert filter_rows(data, FilterSpec(order=CONFIDENCE_DESC)).tolist() == [2, 1, 3, 0, 4]
    assert filter_rows(data, FilterSpec(correctness=MISCLASSIFIED, order=CONFIDENCE_DESC)).tolist() == [2, 0, 4]
    assert filter_rows(data, FilterSpec(correctness=MISCLASSIFIED, order=CONFIDENCE_ASC)).tolist() == [4, 0, 2]
    unindexed = BrowseData("/d", ["a", "b"], paths, labels, np.full(5, -1), np.full(5, np.nan, np.float32),
                           np.full(5, np.nan, np.float32))
    assert filter_rows(unindexed, FilterSpec(order=CONFIDENCE_DESC)).tolist() == [0, 1, 2, 3, 4]
