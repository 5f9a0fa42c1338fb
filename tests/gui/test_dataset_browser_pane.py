"""Dataset browser: open a folder or CSV, index it with the classifier (GPU lane), thumbnails cached on disk,
filters and per-class accuracy against numpy, selection to the workbench, and cancelling an indexing job."""
from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.gui.panes.dataset_browser.filters import CORRECT, MISCLASSIFIED
from nemo_desktop.gui.thumbnails import cache_name

pytestmark = pytest.mark.gui


def _browser(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    return window.show_pane("dataset_browser")


def _open(qtbot, pane, path):
    with qtbot.waitSignal(pane.sig_opened, timeout=20000) as opened:
        pane.open_path(path)
    return opened.args[0]


def _index(qtbot, pane):
    with qtbot.waitSignal(pane.sig_opened, timeout=60000) as opened:
        handle = pane.index_dataset()
    assert handle.state == "done"
    return opened.args[0]


def test_open_index_filter_and_send_to_the_workbench(qtbot, digits_window, digits_reference, gui_home):
    pane = _browser(qtbot, digits_window)
    data = _open(qtbot, pane, digits_reference)
    assert len(data) == 50 and not data.indexed
    assert pane.grid_model.rowCount() == 50
    assert pane.class_model.rowCount() == 10
    assert not pane.correctness_combo.isEnabled()  # no predictions before indexing
    assert "not indexed yet" in pane.info_label.text()

    data = _index(qtbot, pane)
    assert data.indexed and len(data) == 50 and data.classifier_id == "test-double:digits-cnn"
    assert pane.correctness_combo.isEnabled()
    # Per-class accuracy matches what the arrays say.
    correct = data.preds == data.labels
    for row in pane.class_model.rows:
        assert row.images == int((data.labels == row.index).sum())
        assert row.correct == int(correct[data.labels == row.index].sum())

    shown = pane.set_filter(correctness=CORRECT)
    assert shown == int(correct.sum())
    assert all(data.preds[r] == data.labels[r] for r in pane.grid_model.rows)
    three = data.class_names.index("three")
    assert pane.set_filter(correctness="all", true_class=three) == 5
    assert set(data.labels[pane.grid_model.rows].tolist()) == {three}
    pane.set_filter(true_class=-1, conf_min=0.9)
    assert np.all(data.conf[pane.grid_model.rows] >= 0.9)
    assert pane.count_label.text().startswith(f"{pane.grid_model.rowCount():,} of 50")

    # Thumbnails of the painted items are made off the GUI thread and cached on disk.
    pane.set_filter(conf_min=0.0, true_class=three)
    pane.grid.viewport().repaint()
    qtbot.waitUntil(lambda: not pane.thumbnails.busy and bool(pane.thumbnails._pixmaps), timeout=10000)
    r = int(pane.grid_model.rows[0])
    assert (gui_home / "thumbnails" / cache_name(data.paths[r], data.sha256[r])).is_file()

    # Selected images go to the workbench with their true class.
    pane.grid.selectAll()
    assert pane.explain_button.isEnabled()
    pane.explain_button.click()
    assert digits_window.current_pane().NAME == "workbench"
    samples = digits_window.panes["workbench"].samples
    assert len(samples) == 5 and {s.true_label for s in samples} == {"three"}
    assert all(s.index_id == data.index_id for s in samples)


def test_a_csv_manifest_opens_and_prediction_filters_wait_for_an_index(qtbot, make_window, tmp_path):
    for i, label in enumerate(["cat", "dog", "cat"]):
        Image.new("RGB", (20, 20), (40 * i, 90, 200)).save(tmp_path / f"img{i}.png")
    (tmp_path / "labels.csv").write_text("path,label\nimg0.png,cat\nimg1.png,dog\nimg2.png,cat\n")
    pane = _browser(qtbot, make_window())
    data = _open(qtbot, pane, tmp_path / "labels.csv")
    assert data.class_names == ["cat", "dog"] and len(data) == 3
    assert [row.images for row in pane.class_model.rows] == [2, 1]
    assert not pane.correctness_combo.isEnabled() and not pane.pred_combo.isEnabled()
    assert pane.set_filter(correctness=MISCLASSIFIED) == 3  # disabled filters do not apply
    assert pane.set_filter(true_class=1) == 1
    # Asked directly, a prediction filter matches nothing in an un-indexed dataset.
    from nemo_desktop.gui.panes.dataset_browser.filters import FilterSpec, filter_rows

    assert len(filter_rows(data, FilterSpec(correctness=MISCLASSIFIED))) == 0


def test_cancelling_indexing_keeps_the_finished_batches(qtbot, make_window, digits, digits_reference):
    from digits_world import DigitsCNNClassifier

    class SlowDigits(DigitsCNNClassifier):
        """Test double: the digits CNN, slowed down so that the job can be cancelled mid-way."""

        def predict_proba(self, images, **kw):
            time.sleep(0.15)
            return super().predict_proba(images, **kw)

    window = make_window(model_process="in-process")
    window.session.put("classifier", "slow-digits", SlowDigits(digits[0]))
    pane = _browser(qtbot, window)
    _open(qtbot, pane, digits_reference)
    pane.index_batch_size = 4  # cancellation is checked between batches
    handle = pane.index_dataset()
    handle_batches = []
    handle.sig_progress.connect(lambda p: handle_batches.append(p.done) if p.stage == "Indexing images" else None)
    qtbot.waitUntil(lambda: any(d >= 4 for d in handle_batches), timeout=20000)
    assert pane.cancel_index_button.isVisible()
    with qtbot.waitSignal(handle.sig_cancelled, timeout=20000):
        pane.cancel_index_button.click()
    # The pane reopens the dataset and shows what is indexed so far.
    qtbot.waitUntil(lambda: pane.data is not None and pane.data.indexed, timeout=20000)
    qtbot.waitUntil(lambda: pane.data.not_indexed is not None, timeout=20000)  # compared with the folder
    assert 0 < len(pane.data) < 50 and pane.data.not_indexed == 50 - len(pane.data)
    assert f"{50 - len(pane.data)} new images not indexed yet" in pane.info_label.text()
    assert not pane.index_progress.isVisible() and pane.index_button.isEnabled()


def test_arriving_thumbnails_repaint_only_the_items_that_waited_for_them(qtbot, make_window, tmp_path):
    folder = tmp_path / "many" / "blue"
    folder.mkdir(parents=True)
    for i in range(300):
        Image.new("RGB", (24, 24), (i % 256, 80, 160)).save(folder / f"{i:03d}.png")
    window = make_window()
    window.resize(900, 700)
    pane = _browser(qtbot, window)
    data = _open(qtbot, pane, tmp_path / "many")
    assert len(data) == 300
    changed: list[tuple[int, int]] = []
    pane.grid_model.dataChanged.connect(lambda first, last, _roles: changed.append((first.row(), last.row())))
    pane.grid.viewport().repaint()
    qtbot.waitUntil(lambda: bool(changed) and not pane.thumbnails.busy, timeout=20000)
    # Only the items on screen were painted, so only they wait for thumbnails and repaint.
    on_screen = {i for i in range(300) if pane.grid.visualRect(pane.grid_model.index(i, 0))
                 .intersects(pane.grid.viewport().rect())}
    assert 0 < len(on_screen) < 300
    assert all(first in on_screen and last in on_screen for first, last in changed)
    assert not pane.grid_model._awaiting  # every painted item got its thumbnail
