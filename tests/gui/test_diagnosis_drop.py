"""Drag-and-drop diagnosis: simulated drag-enter and drop events on the window open the diagnosis dialog,
which shows the classifier's prediction and top-5, completes the true class, runs SciTX and opens the result
in the workbench. Without usable models the failure is shown, never silent."""
from __future__ import annotations

import pytest
from gui_drops import simulate_drop
from PySide6.QtCore import Qt

from nemo_desktop.gui.dialogs.diagnose import DiagnoseDialog
from nemo_desktop.gui.widgets.error_dialog import ErrorDialog

pytestmark = pytest.mark.gui


def drop_files(window, paths):
    entered, dropped, mime = simulate_drop(window, paths)
    assert entered and dropped
    return mime


def _dialog(qtbot, window) -> DiagnoseDialog:
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(DiagnoseDialog)), timeout=10000)
    return next(d for d in window.findChildren(DiagnoseDialog) if d.isVisible())


def test_drop_predict_complete_the_label_and_diagnose(qtbot, digits_window, digits_reference, blue_three):
    from nemo_desktop.core.data.reference_index import build_index

    window = digits_window
    build_index(digits_reference, window.session.get("classifier"), window.session.store())
    window.show()
    qtbot.waitExposed(window)
    _mime = drop_files(window, [blue_three])
    dialog = _dialog(qtbot, window)
    assert dialog.windowTitle() == "Diagnose 1 image"

    # Prediction and top-5 from the current classifier.
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=20000)
    prediction = dialog.report.images[0]
    assert prediction.top5[0].name == "eight" and len(prediction.top5) == 5
    assert "Predicted: <b>eight</b>" in dialog.prediction_label.text()
    assert "Top-5" in dialog.prediction_label.text()
    assert not dialog.diagnose_button.isEnabled()  # no true class yet

    # The completer searches the classifier's classes.
    completer = dialog.label_edit.completer()
    completer.setCompletionPrefix("hre")
    found = [completer.completionModel().index(i, 0).data() for i in range(completer.completionCount())]
    assert found == ["three"]
    qtbot.keyClicks(dialog.label_edit, "thre")
    assert not dialog.diagnose_button.isEnabled() and "not one of the classifier's classes" in \
        dialog.label_hint.text()
    qtbot.keyClicks(dialog.label_edit, "e")
    assert dialog.diagnose_button.isEnabled()

    workbench = window.panes["workbench"]
    switched = []  # the workbench, for the run's live log, comes up behind the dialog before the run starts
    window.tabs.currentChanged.connect(lambda _i: switched.append((window.current_pane(), dialog._run is None)))
    with qtbot.waitSignal(dialog.sig_explained, timeout=60000) as explained:
        qtbot.mouseClick(dialog.diagnose_button, Qt.MouseButton.LeftButton)
    assert switched and switched[0] == (workbench, True)
    outcome = explained.args[0][0]
    assert outcome.error is None and "blue ink" in outcome.result.explanation
    assert window.current_pane() is workbench
    qtbot.waitUntil(lambda: len(workbench.result_view.columns) == 1, timeout=10000)
    assert workbench.result_view.results()[0].explanation == outcome.result.explanation
    assert [s.true_label for s in workbench.samples] == ["three"]
    qtbot.waitUntil(lambda: not any(d.isVisible() for d in window.findChildren(DiagnoseDialog)), timeout=5000)


def test_dropping_an_image_without_models_reports_why(qtbot, make_window, blue_three, monkeypatch):
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    _mime = drop_files(window, [blue_three])
    dialog = _dialog(qtbot, window)
    # No classifier is loaded and the default one's weights are not on this computer (offline tests).
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(ErrorDialog)), timeout=30000)
    error = next(d for d in window.findChildren(ErrorDialog) if d.isVisible())
    assert "not in the local Hugging Face cache" in error.message_label.text()
    assert "Download" in error.hint_label.text() or "offline" in error.hint_label.text().lower()
    assert "could not be classified" in dialog.status_label.text()
    assert not dialog.diagnose_button.isEnabled()
    with qtbot.waitSignal(dialog.sig_open_model_manager, timeout=2000):
        dialog.models_button.click()


def test_class_names_from_the_model_are_shown_as_text_not_markup(qtbot, make_window, digits, blue_three):
    from digits_world import CLASS_NAMES, DigitsCNNClassifier

    names = [n if n != "eight" else "<i>eight</i> & <img src='x.png'>" for n in CLASS_NAMES]
    window = make_window(model_process="in-process")
    window.session.put("classifier", "digits-cnn", DigitsCNNClassifier(digits[0], class_names=names))
    window.show()
    qtbot.waitExposed(window)
    _mime = drop_files(window, [blue_three])
    dialog = _dialog(qtbot, window)
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=20000)
    text = dialog.prediction_label.text()
    assert "Predicted: <b>&lt;i&gt;eight&lt;/i&gt; &amp; &lt;img src=&#x27;x.png&#x27;&gt;</b>" in text
    assert "<img" not in text and "<i>" not in text
    qtbot.keyClicks(dialog.label_edit, "<b>three")  # what the user types is shown as typed
    assert dialog.label_hint.textFormat() == Qt.TextFormat.PlainText and "<b>three" in dialog.label_hint.text()


def test_diagnose_is_refused_when_the_true_class_is_the_prediction(qtbot, digits_window, blue_three, tmp_path):
    window = digits_window
    window.show()
    qtbot.waitExposed(window)
    other = tmp_path / "also_blue_three.png"
    other.write_bytes(blue_three.read_bytes())
    drop_files(window, [blue_three, other])
    dialog = _dialog(qtbot, window)
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=20000)
    assert dialog.report.images[0].top5[0].name == "eight"
    dialog.same_for_all.setChecked(True)
    dialog.set_true_label("eight")  # what the classifier predicts: nothing to explain
    assert not dialog.diagnose_button.isEnabled()
    assert "already predicts the true class for every image" in dialog.label_hint.text()
    dialog.same_for_all.setChecked(False)
    dialog.file_list.setCurrentRow(1)
    dialog.set_true_label("three")  # now one of the two is misclassified: the other is skipped
    qtbot.waitUntil(dialog.diagnose_button.isEnabled, timeout=5000)
    assert "1 correctly classified image is skipped" in dialog.label_hint.text()
    assert [s.path for s in dialog.samples()] == [str(other)]


def test_a_dialog_closed_right_after_diagnose_starts_no_run(qtbot, digits_window, blue_three):
    """The run is submitted on the turn after Diagnose (the workbench is shown first): closing the dialog in
    between must not leave a run behind it."""
    window = digits_window
    window.show()
    qtbot.waitExposed(window)
    drop_files(window, [blue_three])
    dialog = _dialog(qtbot, window)
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=20000)
    dialog.set_true_label("three")
    titles = []
    window.jobs.sig_job_added.connect(lambda handle: titles.append(handle.title))
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)  # closed, not deleted: its turn still comes
    assert dialog.diagnose() is True
    assert not dialog.diagnose_button.isEnabled() and dialog.diagnose() is False  # pressed once only
    dialog.reject()
    qtbot.wait(200)
    assert not any(t.startswith("Diagnosing") for t in titles) and dialog._run is None
