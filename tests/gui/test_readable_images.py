"""Readable images in the panes (issue 19): result-view images open zoomable at full resolution and each
counterfactual has a before/after comparison; the dataset grid has a thumbnail-size control that a new window
remembers and opens grid images zoomable; the diagnosis dialog enlarges small images crisply."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QPushButton

from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, SampleInfo
from nemo_desktop.gui.panes.workbench.widgets.result_view import ResultBundle, ResultView
from nemo_desktop.gui.widgets.compare_view import CompareDialog, qimage_to_array
from nemo_desktop.gui.widgets.image_viewer import ClickableImage, ImageViewerDialog

pytestmark = pytest.mark.gui


def visible(kind):
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, kind) and w.isVisible()]


def close_all(kind):
    for w in visible(kind):
        w.close()


@pytest.fixture
def digit_files(tmp_path):
    """A 32-px original and its counterfactual with a changed 8x8 patch, as stored artifacts would be."""
    rng = np.random.default_rng(0)
    original = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    edited = original.copy()
    edited[8:16, 20:28] = 255 - edited[8:16, 20:28]
    paths = {}
    for name, arr in (("input", original), ("edited_0", edited)):
        paths[name] = str(tmp_path / f"{name}.png")
        Image.fromarray(arr).save(paths[name])
    return paths, original, edited


def test_result_images_zoom_at_full_resolution_and_counterfactuals_compare(qtbot, digit_files):
    paths, original, edited = digit_files
    cand = Candidate("The ink colour.", "image", "Make the ink black", "edited_0", 0.1, 0.8, 70.0)
    r = ExplanationResult("scitx", SampleInfo("q.png", "abc", 3, "three", 8, "eight", 0.1, 0.9,
                                              [ClassScore(8, "eight", 0.9)], image_artifact="input"),
                          explanation=cand.hypothesis, selected_index=0, cei=70.0, candidates=[cand])
    reduced = {k: QImage(p).scaled(16, 16) for k, p in paths.items()}  # the column's reduced copies
    view = ResultView()
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.sig_built, timeout=5000):
        view.show_bundles([ResultBundle("k", None, r, reduced, paths)])
    view.resize(700, 1500)
    view.show()
    column = view.columns[0]
    inputs = [w for w in column.findChildren(ClickableImage, "image_input")]
    assert len(inputs) == 2  # the header and the candidate's pair
    header = inputs[0]
    assert header.pixmap().width() == 16 * 13  # 16 px enlarged by a whole factor in the 224-px box
    qtbot.mouseClick(header, Qt.MouseButton.LeftButton)
    viewer = visible(ImageViewerDialog)
    assert len(viewer) == 1
    qtbot.waitUntil(lambda: viewer[0].view.image_size() == (32, 32), timeout=5000)  # the file, not the copy
    assert viewer[0].windowTitle() == "Input image: q.png"
    close_all(ImageViewerDialog)

    column.findChild(QPushButton, "compare0").click()
    dialogs = visible(CompareDialog)
    assert len(dialogs) == 1
    d = dialogs[0]
    assert not d.split_view.resized and d.split_view.before.width() == 32
    assert (qimage_to_array(d.split_view.before) == original).all()
    changed = np.abs(original.astype(int) - edited.astype(int)).mean(axis=2) > 0
    assert d.difference.changed_fraction > 0 and (d.difference.heat.any(axis=2) == changed).all()
    d.slider.setValue(0)  # the whole image from the counterfactual
    assert (qimage_to_array(d.split_view.composed()) == edited).all()
    close_all(CompareDialog)


def _browser(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    return window.show_pane("dataset_browser")


def test_thumbnail_size_changes_the_grid_and_a_new_window_remembers_it(qtbot, make_window, tmp_path):
    folder = tmp_path / "ds" / "red"
    folder.mkdir(parents=True)
    for i in range(6):
        Image.new("RGB", (24, 24), (200, 20 * i, 20)).save(folder / f"{i}.png")
    window = make_window()
    pane = _browser(qtbot, window)
    with qtbot.waitSignal(pane.sig_opened, timeout=20000):
        pane.open_path(tmp_path / "ds")
    assert pane.thumbnails.side == 112 and pane.grid.gridSize().width() == 112 + 24
    pane.thumbnail_size.slider.setValue(192)
    assert pane.grid.itemDelegate().side == 192 and pane.grid.gridSize().width() == 192 + 24
    assert pane.thumbnails.side == 256  # larger thumbnails are made larger, not blurred up
    assert pane.thumbnail_size.value_label.text() == "192 px"
    pane.grid.viewport().repaint()
    qtbot.waitUntil(lambda: not pane.thumbnails.busy, timeout=20000)
    window.close()

    again = make_window()
    pane2 = _browser(qtbot, again)
    assert pane2.thumbnail_size.side == 192
    assert pane2.grid.itemDelegate().side == 192 and pane2.thumbnails.side == 256
    pane2.thumbnail_size.slider.setValue(10)  # clamped to the smallest size
    assert pane2.thumbnail_size.side == 48 and pane2.thumbnails.side == 112


def test_a_grid_image_opens_zoomable_from_the_button_and_space(qtbot, make_window, tmp_path):
    folder = tmp_path / "ds" / "cat"
    folder.mkdir(parents=True)
    Image.new("RGB", (20, 10), (0, 120, 0)).save(folder / "tiny.png")
    window = make_window()
    pane = _browser(qtbot, window)
    with qtbot.waitSignal(pane.sig_opened, timeout=20000):
        pane.open_path(tmp_path / "ds")
    assert not pane.view_button.isEnabled()
    pane.grid.setCurrentIndex(pane.grid_model.index(0, 0))
    assert pane.view_button.isEnabled()
    pane.view_button.click()
    viewers = visible(ImageViewerDialog)
    assert len(viewers) == 1
    qtbot.waitUntil(lambda: viewers[0].view.image_size() == (20, 10), timeout=5000)
    assert "True class: cat" in viewers[0].findChild(type(viewers[0].zoom_label), "imageCaption").text()
    close_all(ImageViewerDialog)
    pane.grid.setFocus()
    qtbot.keyClick(pane.grid, Qt.Key.Key_Space)
    assert len(visible(ImageViewerDialog)) == 1
    close_all(ImageViewerDialog)


def test_diagnosis_dialog_enlarges_a_small_image_with_crisp_pixels(qtbot, make_window, digits, tmp_path):
    from digits_world import DigitsCNNClassifier

    from nemo_desktop.gui.dialogs.diagnose import DiagnoseDialog

    arr = np.zeros((16, 16, 3), np.uint8)
    arr[::2, ::2] = 255
    path = tmp_path / "small.png"
    Image.fromarray(arr).save(path)
    window = make_window(model_process="in-process")
    window.session.put("classifier", "digits-cnn", DigitsCNNClassifier(digits[0]))
    dialog = DiagnoseDialog(window, [path])
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.preview.image is not None, timeout=10000)
    pm = dialog.preview.pixmap()
    assert pm.width() == 16 * 15  # enlarged by a whole factor in the 256-px preview
    shown = qimage_to_array(pm.toImage())
    assert (shown[:15, :15] == 255).all() and (shown[:15, 15:30] == 0).all()  # 15x15 squares, no blur
    qtbot.mouseClick(dialog.preview, Qt.MouseButton.LeftButton)
    viewers = visible(ImageViewerDialog)
    assert len(viewers) == 1
    with qtbot.waitSignal(viewers[0].sig_loaded, timeout=5000):
        pass
    assert viewers[0].view.image_size() == (16, 16)
    close_all(ImageViewerDialog)
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=20000)
