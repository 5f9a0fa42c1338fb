"""Batch results: a folder with one sub-folder per class is dropped on the window, the true classes come from the
folder names, and after the diagnosis the workbench's batch table lists every image with an honest status (explained,
skipped because correctly classified or without a true class, failed with its error and hint). A row opens its
result in the result view; the combined report is exported as HTML (every image, escaped model text) and PDF."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from gui_drops import simulate_drop
from PySide6.QtCore import QPoint, Qt

from nemo_desktop.core.base.batch_items import EXPLAINED, FAILED, SKIPPED_CORRECT, SKIPPED_NO_LABEL
from nemo_desktop.gui.dialogs.diagnose import DiagnoseDialog
from nemo_desktop.gui.panes.workbench.widgets.batch_table import COL_CEI, COL_FILE, COL_IMAGE, COL_STATUS, TONE_COLOURS

pytestmark = pytest.mark.gui

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def class_folders(tmp_path, digits, digits_reference, blue_three):
    """root/three: the blue three (misclassified), a training three (correct) and a broken file; root/misc: a
    digit in a folder that is not a class."""
    from digits_world import DigitsCNNClassifier

    from nemo_desktop.core.base.images import load_image

    clf = DigitsCNNClassifier(digits[0])
    root = tmp_path / "dropped"
    (root / "three").mkdir(parents=True)
    (root / "misc").mkdir()
    shutil.copy(blue_three, root / "three" / "blue_three.png")
    correct = next(p for p in sorted((digits_reference / "three").iterdir())
                   if clf.class_names[int(clf.predict_proba([load_image(p)])[0].argmax())] == "three")
    shutil.copy(correct, root / "three" / "red_three.png")
    (root / "three" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n this is not really a PNG")
    shutil.copy(correct, root / "misc" / "unknown.png")
    return root


def _rows(panel) -> dict[str, object]:
    return {it.name: it for it in panel.items}


def test_folder_drop_fills_the_batch_table_opens_results_and_exports_one_report(
        qtbot, digits_window, digits_reference, class_folders, monkeypatch, tmp_path):
    import digits_world

    from nemo_desktop.core.data.reference_index import build_index

    # Model text with markup: the scripted hypotheses (and so the explanation) carry a script tag.
    monkeypatch.setattr(digits_world, "HYPOTHESES", [h + " " + SCRIPT for h in digits_world.HYPOTHESES])
    window = digits_window
    build_index(digits_reference, window.session.get("classifier"), window.session.store())
    window.show()
    qtbot.waitExposed(window)
    entered, dropped, _mime = simulate_drop(window, [class_folders])
    assert entered and dropped
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(DiagnoseDialog)), timeout=10000)
    dialog = next(d for d in window.findChildren(DiagnoseDialog) if d.isVisible())
    assert dialog.windowTitle() == "Diagnose 4 images"  # the images of the class sub-folders
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=20000)

    # The folder names give the true classes; 'misc' is not a class and says so.
    assert dialog.folder_labels.isChecked() and not dialog.same_for_all.isChecked()
    by_name = {p.rsplit("/", 1)[-1]: dialog.canonical_label(dialog.labels.get(p, "")) for p in dialog.images}
    assert by_name == {"blue_three.png": "three", "red_three.png": "three", "broken.png": "three",
                       "unknown.png": None}
    assert "True class from the folder name for 3 of 4 images" in dialog.folder_note.text()
    assert "'misc'" in dialog.folder_note.text() and "skipped" in dialog.folder_note.text()
    assert dialog.diagnose_button.isEnabled()
    assert [s.path.rsplit("/", 1)[-1] for s in dialog.samples()] == ["blue_three.png"]
    # Turned off, the folder classes are gone (nothing typed yet: Diagnose waits); turned on again, they are back.
    dialog.folder_labels.setChecked(False)
    assert not dialog.diagnose_button.isEnabled() and dialog.same_for_all.isEnabled()
    assert not any(dialog.labels.get(p) for p in dialog.images) and dialog.folder_note.text() == ""
    dialog.folder_labels.setChecked(True)
    assert dialog.diagnose_button.isEnabled() and not dialog.same_for_all.isEnabled()

    workbench = window.panes["workbench"]
    with qtbot.waitSignal(dialog.sig_explained, timeout=90000):
        qtbot.mouseClick(dialog.diagnose_button, Qt.MouseButton.LeftButton)
    panel = workbench.batch_panel
    qtbot.waitUntil(lambda: panel.isVisible() and panel.export_button.isEnabled(), timeout=10000)
    rows = _rows(panel)
    assert {n: it.status for n, it in rows.items()} == {
        "blue_three.png": EXPLAINED, "red_three.png": SKIPPED_CORRECT, "broken.png": FAILED,
        "unknown.png": SKIPPED_NO_LABEL}
    assert "blue ink" in rows["blue_three.png"].explanation and rows["blue_three.png"].cei > 0
    assert rows["broken.png"].error.startswith("The image cannot be read") and rows["broken.png"].hint
    assert "'misc' is not a class" in rows["unknown.png"].summary_text()
    assert panel.summary.text() == ("Batch: 4 images: 1 explained; 1 skipped (correctly classified); "
                                    "1 skipped (no true class); 1 failed")
    from nemo_desktop.gui.widgets.error_dialog import ErrorDialog
    assert not any(d.isVisible() for d in window.findChildren(ErrorDialog))  # the table says it all

    # Tones: skipped images are neutral grey, not the failure red; the failure is red with its hint.
    model = panel.model
    colour = {model.data(model.index(r, COL_FILE), Qt.ItemDataRole.DisplayRole):
              model.data(model.index(r, COL_STATUS), Qt.ItemDataRole.ForegroundRole).name()
              for r in range(model.rowCount())}
    assert colour["red_three.png"] == colour["unknown.png"] == TONE_COLOURS["neutral"]
    assert colour["broken.png"] == TONE_COLOURS["failure"] and colour["blue_three.png"] == TONE_COLOURS["finding"]
    broken_row = [it.name for it in panel.items].index("broken.png")
    assert "What to do:" in model.data(model.index(broken_row, COL_STATUS), Qt.ItemDataRole.ToolTipRole)
    qtbot.waitUntil(lambda: model.data(model.index(0, COL_IMAGE), Qt.ItemDataRole.DecorationRole) is not None,
                    timeout=10000)  # thumbnails arrive from the I/O lane

    # Click-through: Enter on the explained row opens its result in the result view.
    workbench.result_view.show_bundles([])
    workbench._result_key = None
    # Sorted by best CEI (largest first, by clicking the header twice), the explained image comes first.
    header = panel.table.horizontalHeader()
    for _ in range(2):
        qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton,
                         pos=header.rect().topLeft() + QPoint(header.sectionViewportPosition(COL_CEI) + 5, 5))
    assert panel.proxy.sortColumn() == COL_CEI and panel.proxy.sortOrder() == Qt.SortOrder.DescendingOrder
    assert panel.proxy.index(0, COL_FILE).data() == "blue_three.png"
    panel.table.setFocus()
    panel.table.setCurrentIndex(panel.proxy.index(0, COL_FILE))
    qtbot.keyClick(panel.table, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(workbench.result_view.columns) == 1, timeout=10000)
    assert workbench.result_view.results()[0].result_key == rows["blue_three.png"].result_key
    # A skipped row has no result: it says why in the status bar and leaves the view as it is.
    skipped_row = [it.name for it in panel.items].index("red_three.png")
    rect = panel.table.visualRect(panel.proxy.mapFromSource(model.index(skipped_row, COL_FILE)))
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())  # a real double-click:
    qtbot.mouseDClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())  # press, then again
    assert "skipped (correctly classified)" in window.statusBar().currentMessage()
    assert workbench.result_view.results()[0].result_key == rows["blue_three.png"].result_key

    # One combined report: every image, the explained one's section, the model text escaped.
    with qtbot.waitSignal(panel.export(tmp_path / "batch.html").sig_done, timeout=60000) as done:
        pass
    html = done.args[0].read_text(encoding="utf-8")
    for name in ("blue_three.png", "red_three.png", "broken.png", "unknown.png"):
        assert name in html
    assert SCRIPT not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Sample 1: blue_three.png" in html and "skipped (correctly classified)" in html
    assert "The image cannot be read" in html
    assert "Wrote" in panel.export_status.text()
    with qtbot.waitSignal(panel.export(tmp_path / "batch.pdf").sig_done, timeout=60000) as done:
        pass
    pdf = done.args[0].read_bytes()
    assert pdf.startswith(b"%PDF")
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", "-layout", str(done.args[0]), "-"], check=True, capture_output=True,
                              text=True).stdout
        assert "Batch diagnosis of 4 images" in text and "blue_three.png" in text


def test_a_workbench_run_on_several_samples_lists_failures_and_cancellations(qtbot, digits_window, digits_reference,
                                                                              blue_three, tmp_path):
    from nemo_desktop.core.base.batch_items import CANCELLED
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.app.samples import Sample

    window = digits_window
    build_index(digits_reference, window.session.get("classifier"), window.session.store())
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("workbench")
    qtbot.waitUntil(lambda: bool(pane.methods), timeout=20000)
    gone = tmp_path / "gone.png"
    gone.write_bytes(blue_three.read_bytes())
    samples = [Sample(str(blue_three), "three", "eight", 0.9), Sample(str(gone), "three", "eight", 0.9)]
    panel = pane.batch_panel

    # Cancelled at once: no image gets an outcome, and each says it was cancelled (not failed).
    handle = pane.run(samples, "scitx")
    handle.cancel()
    qtbot.waitUntil(lambda: not handle.active, timeout=30000)
    qtbot.waitUntil(lambda: panel.export_button.isEnabled(), timeout=5000)
    assert panel.isVisible() and [it.status for it in panel.items] == [CANCELLED, CANCELLED]

    # Run to the end with one image removed meanwhile: that row fails with the method's message, the other is
    # explained; the status counts say n.
    gone.unlink()
    handle = pane.run(samples, "scitx")
    qtbot.waitUntil(lambda: handle.state == "done", timeout=90000)
    qtbot.waitUntil(lambda: panel.export_button.isEnabled(), timeout=5000)
    assert [it.status for it in panel.items] == [EXPLAINED, FAILED]
    assert "gone.png" in panel.items[1].error or "does not exist" in panel.items[1].error
    assert panel.summary.text() == "Batch: 2 images: 1 explained; 1 failed"

    # A run on one sample has no batch table.
    handle = pane.run(samples[:1], "scitx")
    assert not panel.isVisible()
    qtbot.waitUntil(lambda: not handle.active, timeout=90000)


def test_a_batch_run_with_failures_points_to_the_table_instead_of_a_modal_error(qtbot, make_window, tmp_path):
    """A single image's failure is a modal error; a batch's failures are rows of its table (with their hints),
    so no dialog repeats them: the status bar points to the table."""
    from nemo_desktop.core.base.batch_items import BatchItem
    from nemo_desktop.core.app.jobs.models import SampleOutcome
    from nemo_desktop.core.app.samples import Sample
    from nemo_desktop.gui.widgets.error_dialog import ErrorDialog

    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("workbench")
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    samples = [Sample(str(tmp_path / f"{n}.png"), "three") for n in ("a", "b")]
    error = {"type": "ImageError", "message": "The image cannot be read.", "hint": "Check the file."}
    outcomes = [SampleOutcome(samples[0], error=error), SampleOutcome(samples[1], error=error)]

    def run(batch):
        handle = window.jobs.submit(lambda ctx: outcomes, title="Explaining")
        pane.start_watching(handle, batch)
        with qtbot.waitSignal(handle.sig_finished, timeout=5000):
            pass

    run([BatchItem(s.path, "three") for s in samples])
    qtbot.waitUntil(lambda: any("2 of 2 images could not be explained: the batch table says why" in m
                                for m in messages), timeout=5000)
    assert not any(d.isVisible() for d in window.findChildren(ErrorDialog))
    run(None)  # one image at a time: no table, so the error is shown
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(ErrorDialog)), timeout=5000)
