"""Readable images (issue 19): the zoomable viewer zooms around the cursor, pans, fits and shows pixels crisp;
the before/after view composes original and counterfactual at the split column; the difference map of
identical images is zero and says so."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QImage, QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QApplication, QLabel, QPushButton

from nemo_desktop.gui.widgets.compare_view import BeforeAfterView, CompareDialog, array_to_qimage, qimage_to_array
from nemo_desktop.gui.widgets.image_viewer import ClickableImage, ImageViewerDialog, fit_pixmap
from nemo_desktop.gui.widgets.zoom_view import ZoomableImageView

pytestmark = pytest.mark.gui


def solid(w: int, h: int, rgb) -> QImage:
    return array_to_qimage(np.full((h, w, 3), rgb, np.uint8))


def checkerboard(side: int = 32) -> QImage:
    yy, xx = np.mgrid[0:side, 0:side]
    arr = np.where(((yy + xx) % 2 == 0)[..., None], np.uint8(255), np.uint8(0)) * np.ones(3, np.uint8)
    return array_to_qimage(arr)


def wheel(view, pos: QPoint, notches: int) -> None:
    event = QWheelEvent(QPointF(pos), QPointF(view.viewport().mapToGlobal(pos)), QPoint(0, 0),
                        QPoint(0, 120 * notches), Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), event)


def mouse(view, kind, pos: QPoint, buttons) -> None:
    event = QMouseEvent(kind, QPointF(pos), QPointF(view.viewport().mapToGlobal(pos)), Qt.MouseButton.LeftButton,
                        buttons, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(view.viewport(), event)


@pytest.fixture
def view(qtbot):
    v = ZoomableImageView()
    qtbot.addWidget(v)
    v.resize(400, 400)
    v.show()
    qtbot.waitExposed(v)
    v.set_image(checkerboard(32))
    return v


def test_fit_enlarges_a_small_image_by_whole_pixels_with_nearest_neighbour(view):
    assert view.fitted
    assert view.scale_factor == 12.0  # 400 px viewport (less the frame) / 32 px, rounded down to whole pixels
    assert view.item.transformationMode() == Qt.TransformationMode.FastTransformation


def test_wheel_zooms_around_the_cursor_and_fit_restores(view):
    fitted = view.scale_factor
    cursor = QPoint(300, 120)
    under = view.mapToScene(cursor)
    wheel(view, cursor, 2)
    assert view.scale_factor == pytest.approx(fitted * 1.25 ** 2)
    assert not view.fitted
    after = view.mapToScene(cursor)  # the image point under the cursor stayed under it
    assert abs(after.x() - under.x()) < 0.2 and abs(after.y() - under.y()) < 0.2
    wheel(view, cursor, -4)
    assert view.scale_factor == pytest.approx(fitted / 1.25 ** 2)
    assert view.item.transformationMode() == Qt.TransformationMode.FastTransformation  # still above 1:1
    view.set_scale(0.5)
    assert view.item.transformationMode() == Qt.TransformationMode.SmoothTransformation  # reduced: smooth
    view.fit()
    assert view.scale_factor == fitted and view.fitted
    view.actual_size()
    assert view.scale_factor == 1.0


def test_dragging_pans_the_zoomed_image(qtbot, view):
    view.zoom_by(4)
    h, v = view.horizontalScrollBar().value(), view.verticalScrollBar().value()
    centre_before = view.mapToScene(view.viewport().rect().center())
    mouse(view, QEvent.Type.MouseButtonPress, QPoint(200, 200), Qt.MouseButton.LeftButton)
    for step in range(1, 6):
        mouse(view, QEvent.Type.MouseMove, QPoint(200 - 20 * step, 200 - 10 * step), Qt.MouseButton.LeftButton)
    mouse(view, QEvent.Type.MouseButtonRelease, QPoint(100, 150), Qt.MouseButton.NoButton)
    assert view.horizontalScrollBar().value() == h + 100
    assert view.verticalScrollBar().value() == v + 50
    centre_after = view.mapToScene(view.viewport().rect().center())
    assert centre_after.x() > centre_before.x() and centre_after.y() > centre_before.y()


def test_viewer_dialog_buttons_say_the_size_and_zoom(qtbot):
    dialog = ImageViewerDialog(checkerboard(16), "A digit", "caption text")
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.findChild(QPushButton, "actualSizeButton").click()
    assert dialog.view.scale_factor == 1.0
    assert dialog.zoom_label.text() == "16\u00d716 px \u00b7 zoom 100%"
    dialog.findChild(QPushButton, "zoomInButton").click()
    assert dialog.view.scale_factor == pytest.approx(1.25)
    dialog.findChild(QPushButton, "fitButton").click()
    assert dialog.view.fitted and dialog.view.scale_factor >= 2


def test_clicking_an_image_opens_the_viewer_at_full_resolution(qtbot, tmp_path):
    path = tmp_path / "big.png"
    checkerboard(64).save(str(path))
    label = ClickableImage(96)
    qtbot.addWidget(label)
    small = checkerboard(64).scaled(32, 32)
    label.set_image(small, path=path, title="Input")
    assert label.pixmap().width() == 64  # 32 px enlarged by 2 (whole pixels) in a 96-px box
    label.show()
    qtbot.mouseClick(label, Qt.MouseButton.LeftButton)
    viewers = [w for w in QApplication.topLevelWidgets() if isinstance(w, ImageViewerDialog) and w.isVisible()]
    assert len(viewers) == 1
    assert viewers[0].view.image_size() == (32, 32)  # at once: the copy in memory
    assert "reading the file" in viewers[0].zoom_label.text()
    with qtbot.waitSignal(viewers[0].sig_loaded, timeout=5000) as loaded:
        pass
    assert loaded.args == [True] and viewers[0].view.image_size() == (64, 64)  # then the file at full size
    assert viewers[0].zoom_label.text().startswith("64\u00d764 px \u00b7 zoom")
    assert viewers[0].windowTitle() == "Input"
    viewers[0].close()


def test_an_unreadable_file_keeps_the_copy_and_says_so(qtbot, tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    dialog = ImageViewerDialog(checkerboard(8), "Bad", path=bad)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.sig_loaded, timeout=5000) as loaded:
        dialog.show()
    assert loaded.args == [False] and dialog.view.image_size() == (8, 8)
    assert "could not be read" in dialog.zoom_label.text()


def test_fit_pixmap_enlarges_by_whole_factors_with_crisp_pixels():
    pm = fit_pixmap(checkerboard(32), 220)
    assert (pm.width(), pm.height()) == (192, 192)  # 32 x 6
    arr = qimage_to_array(pm.toImage())
    block = arr[:6, :6]
    assert (block == block[0, 0]).all() and (arr[:6, 6:12] != block[0, 0]).all()  # 6x6 uniform squares
    assert fit_pixmap(checkerboard(32), 500).width() == 480
    assert fit_pixmap(solid(400, 200, (9, 9, 9)), 100).width() == 100


def test_split_position_decides_which_image_each_column_comes_from(qtbot):
    before, after = solid(40, 20, (255, 0, 0)), solid(40, 20, (0, 0, 255))
    view = BeforeAfterView(before, after)
    qtbot.addWidget(view)
    column = 25
    view.set_split(30)
    assert tuple(qimage_to_array(view.composed())[10, column]) == (255, 0, 0)  # left of the split: original
    view.set_split(10)
    assert tuple(qimage_to_array(view.composed())[10, column]) == (0, 0, 255)  # right of it: counterfactual
    assert tuple(qimage_to_array(view.item.pixmap().toImage())[10, column]) == (0, 0, 255)
    assert round(view.handle.pos().x()) == 10


def test_dragging_the_split_handle_and_the_slider_move_the_split(qtbot):
    dialog = CompareDialog(solid(40, 20, (255, 0, 0)), solid(40, 20, (0, 0, 255)))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    view = dialog.split_view
    dialog.slider.setValue(5)
    assert view.split == 5 and tuple(qimage_to_array(view.composed())[3, 7]) == (0, 0, 255)
    start = view.mapFromScene(QPointF(5, 10))
    target = view.mapFromScene(QPointF(30, 10))
    mouse(view, QEvent.Type.MouseButtonPress, start, Qt.MouseButton.LeftButton)
    mouse(view, QEvent.Type.MouseMove, (start + target) / 2, Qt.MouseButton.LeftButton)
    mouse(view, QEvent.Type.MouseMove, target, Qt.MouseButton.LeftButton)
    mouse(view, QEvent.Type.MouseButtonRelease, target, Qt.MouseButton.NoButton)
    assert abs(view.split - 30) <= 1
    assert dialog.slider.value() == view.split
    assert tuple(qimage_to_array(view.composed())[3, 20]) == (255, 0, 0)


def test_difference_of_identical_images_is_zero_and_says_so(qtbot):
    image = checkerboard(24)
    dialog = CompareDialog(image, image.copy())
    qtbot.addWidget(dialog)
    assert dialog.difference.identical
    assert not dialog.difference.heat.any()
    assert not qimage_to_array(dialog.diff_view.item.pixmap().toImage()).any()
    assert "identical" in dialog.scale_label.text()


def test_difference_map_marks_the_edited_region_with_its_scale_in_words(qtbot):
    a = np.full((20, 30, 3), 100, np.uint8)
    b = a.copy()
    b[5:10, 10:20] = 151  # +51 of 255 = 20% in a 5x10 patch
    dialog = CompareDialog(array_to_qimage(a), array_to_qimage(b))
    qtbot.addWidget(dialog)
    d = dialog.difference
    assert d.max_abs == pytest.approx(0.2)
    assert d.changed_fraction == pytest.approx(50 / 600)
    assert (d.heat[5:10, 10:20] == 255).all() and not d.heat[:5].any()  # white = the largest change
    assert "20% of the full brightness range (51 of 255" in dialog.scale_label.text()


def test_a_counterfactual_of_another_size_is_resized_and_the_dialog_says_so(qtbot):
    dialog = CompareDialog(solid(32, 32, (10, 10, 10)), solid(64, 64, (10, 10, 10)))
    qtbot.addWidget(dialog)
    assert dialog.split_view.resized and dialog.difference.identical
    note = dialog.findChild(QLabel, "compareNote").text()
    assert "64\u00d764 px" in note and "resized" in note


def test_closing_the_viewer_before_the_file_is_read_is_harmless(qtbot, tmp_path):
    path = tmp_path / "img.png"
    checkerboard(64).save(str(path))
    dialog = ImageViewerDialog(checkerboard(8), "Closed early", path=path)
    dialog.show()
    dialog.close()  # deleted on close; the read still finishes on the pool
    from PySide6.QtCore import QThreadPool

    assert QThreadPool.globalInstance().waitForDone(5000)
    qtbot.wait(50)  # the queued result arrives for a deleted dialog and is dropped


def test_clicking_an_image_in_report_html_opens_it_zoomable(qtbot, tmp_path):
    """The analyses pane shows its result as report HTML in a QTextBrowser: its images zoom on a click too."""
    import base64
    import io

    from PIL import Image
    from PySide6.QtWidgets import QTextBrowser

    from nemo_desktop.core.reports.images import image_from_file
    from nemo_desktop.gui.widgets.text_images import attach_zoom_to_text_browser, image_at

    path = tmp_path / "tiny.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(path)
    embedded = image_from_file(path, 384)  # as the report builder embeds it: enlarged x8
    uri = "data:image/png;base64," + base64.b64encode(embedded.data).decode()
    browser = QTextBrowser()
    qtbot.addWidget(browser)
    browser.resize(500, 400)
    browser.setHtml(f'<p>Before</p><p><img src="{uri}" width="{embedded.width}" height="{embedded.height}"></p>'
                    "<p>After the image</p>")
    attach_zoom_to_text_browser(browser)
    browser.show()
    qtbot.waitExposed(browser)
    text_point = browser.cursorRect(browser.document().find("After")).center()
    assert image_at(browser, text_point) is None
    cursor = browser.document().find("Before")
    image_point = browser.cursorRect(cursor).bottomLeft() + QPoint(40, 40)
    assert image_at(browser, image_point) is not None
    qtbot.mouseClick(browser.viewport(), Qt.MouseButton.LeftButton, pos=image_point)
    viewers = [w for w in QApplication.topLevelWidgets() if isinstance(w, ImageViewerDialog) and w.isVisible()]
    assert len(viewers) == 1 and viewers[0].view.image_size() == (128, 128)
    shown = np.asarray(Image.open(io.BytesIO(embedded.data)).convert("RGB"))
    assert (qimage_to_array(viewers[0].view.item.pixmap().toImage()) == shown).all()
    viewers[0].close()
