"""Issue 43 §7: the Report exporter lists a new result by itself (no Refresh), keeps the selection, and says so
when no viewer opens a report; an editable model box shows its text from the start; a file dragged over the
window is highlighted; the progress bar's percentage is not drawn over the bar."""
from __future__ import annotations

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QDragEnterEvent, QDragLeaveEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from test_analyses_pane import folder_count  # noqa: F401 - the registered test-double analysis


def test_the_exporter_lists_a_new_result_without_refresh_and_keeps_the_selection(qtbot, make_window,
                                                                                   folder_count):  # noqa: F811
    window = make_window()
    window.resize(1280, 760)
    window.show()
    qtbot.waitExposed(window)
    store = window.session.store()
    store.put("a" * 64, "folder-count", {"kind": "dataset", "analysis": folder_count, "counts": {"cat": 3}})
    pane = window.show_pane("report_exporter")
    qtbot.waitUntil(lambda: pane.table.rowCount() == 1, timeout=20000)
    pane.select_keys(["a" * 64])

    def analysis(ctx):  # a job that stores a result, as an analysis run does
        store.put("b" * 64, "folder-count", {"kind": "dataset", "analysis": folder_count, "counts": {"dog": 2}})
        return "stored"

    job = window.jobs.submit(analysis, title="An analysis")
    qtbot.waitUntil(lambda: pane.table.rowCount() == 2, timeout=20000)  # no Refresh pressed
    assert job.state == "done"
    assert [it.ident for it in pane.selected_items()] == ["a" * 64]

    window.show_pane("workbench")  # hidden: listed again when shown next
    job = window.jobs.submit(lambda ctx: store.put("c" * 64, "folder-count", {
        "kind": "dataset", "analysis": folder_count, "counts": {"eel": 1}}), title="Another analysis")
    qtbot.waitUntil(lambda: job.state == "done", timeout=20000)
    assert pane._stale
    window.show_pane("report_exporter")
    qtbot.waitUntil(lambda: pane.table.rowCount() == 3, timeout=20000)


def test_open_says_so_when_no_viewer_opens_the_report(qtbot, make_window, monkeypatch, tmp_path):
    window = make_window()
    pane = window.show_pane("report_exporter")
    report = tmp_path / "r.html"
    report.write_text("<p>r</p>")
    pane.last_written = [report]
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: False))
    assert pane._open_last() is False
    assert str(report) in pane.status_label.text()
    boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
    assert any(str(report) in b.text() for b in boxes)
    for b in boxes:
        b.close()


def test_a_dragged_file_highlights_the_window(qtbot, make_window, tmp_path):
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(tmp_path / "x.png"))])
    enter = QDragEnterEvent(QPoint(100, 100), Qt.DropAction.CopyAction, data, Qt.MouseButton.NoButton,
                            Qt.KeyboardModifier.NoModifier)
    window.dragEnterEvent(enter)
    assert enter.isAccepted() and window.drop_highlight.isVisible()
    assert window.drop_highlight.geometry() == window.rect()
    window.dragLeaveEvent(QDragLeaveEvent())
    assert not window.drop_highlight.isVisible()
    window.dragEnterEvent(enter)
    empty = QMimeData()  # kept alive: the event holds a pointer to it
    drop = QDropEvent(QPointF(100, 100), Qt.DropAction.CopyAction, empty, Qt.MouseButton.NoButton,
                      Qt.KeyboardModifier.NoModifier)
    window.dropEvent(drop)  # nothing in it: ignored, and the highlight goes
    assert not window.drop_highlight.isVisible()


def test_the_percentage_is_not_drawn_over_the_bar(qtbot):
    from nemo_desktop.gui.widgets.progress_bar import ProgressBar

    bar = ProgressBar()
    qtbot.addWidget(bar)
    bar.setRange(0, 1000)
    bar.setValue(420)
    assert not bar.isTextVisible()
    assert bar.percent_text() == "42 %"


def test_an_editable_model_box_shows_its_text_from_the_start(qtbot, make_window):
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("analyses")
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    pane.select_analysis("model-diff")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "model-diff", timeout=60000)
    boxes = [b for b in pane._model_boxes.values() if b.isEditable()]
    assert boxes
    for box in boxes:  # "current (demo-digits-classifier)" was shown as "rent (demo-digits-classifier)"
        assert box.lineEdit().cursorPosition() == 0, (box.objectName(), box.currentText())
        if box.count() > 1:
            box.setCurrentIndex(box.count() - 1)
            assert box.lineEdit().cursorPosition() == 0
