"""Issue 28 §13 (smaller defects): model pickers mark the models that are not downloaded; Load / Unload do not move
when the hint line under them appears; the import dialog drops "'' cannot be a model name" once the name is fixed."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel

from test_competency_gui import comp_window, comp_world  # noqa: F401 - fixtures
from test_model_manager_pane import _manager, tiny_checkpoint  # noqa: F401 - fixture


def test_model_pickers_mark_models_that_are_not_downloaded(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: nothing downloaded
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("analyses")
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    pane.select_analysis("global-explanation")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "global-explanation", timeout=60000)
    box = pane._model_boxes["mllm"]
    texts = [box.itemText(i) for i in range(box.count())]
    refs = [box.itemData(i) for i in range(box.count())]
    marked = [t for t in texts if t.endswith("(not downloaded)")]
    assert marked, texts
    # The mark is only in the text: choosing such an entry chooses its catalog id.
    i = texts.index(marked[0])
    box.setCurrentIndex(i)
    assert pane.chosen_models()["mllm"] == refs[i] and "(" not in refs[i]


def test_load_and_unload_stay_in_place_when_the_hint_appears(qtbot, make_window, tmp_path, monkeypatch,
                                                             tiny_checkpoint):  # noqa: F811
    from nemo_desktop.gui.panes.model_manager.custom_import import CheckpointImport

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    window = make_window()
    window.resize(1280, 800)
    pane = _manager(qtbot, window)
    request = CheckpointImport("on-disk", "test_resnet", tiny_checkpoint["weights"], tiny_checkpoint["classes"])
    pane.run_import(request, load_after=False)
    qtbot.waitUntil(lambda: pane.model.row_of("on-disk") >= 0 and pane.select("on-disk"), timeout=20000)
    qtbot.wait(50)
    assert not pane.load_reason.isVisible()
    where = (pane.load_button.mapTo(pane, pane.load_button.rect().topLeft()),
             pane.unload_button.mapTo(pane, pane.unload_button.rect().topLeft()))
    pane.select("resnet50")  # not downloaded: the hint says why Load is off
    qtbot.wait(50)
    assert pane.load_reason.isVisible()
    assert (pane.load_button.mapTo(pane, pane.load_button.rect().topLeft()),
            pane.unload_button.mapTo(pane, pane.unload_button.rect().topLeft())) == where


def test_the_import_dialog_drops_a_fixed_names_error(qtbot, tiny_checkpoint):  # noqa: F811
    from nemo_desktop.gui.panes.model_manager.widgets.import_dialog import ImportCheckpointDialog

    dialog = ImportCheckpointDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.weights_edit.setText(str(tiny_checkpoint["weights"]))
    dialog.classes_edit.setText(str(tiny_checkpoint["classes"]))
    dialog.arch_edit.setText("test_resnet")
    dialog.name_edit.setText("")
    dialog.accept()
    assert dialog.error_label.isVisible() and "cannot be a model name" in dialog.error_label.text()
    dialog.name_edit.setText("my-model")
    qtbot.waitUntil(lambda: "cannot be a model name" not in dialog.error_label.text(), timeout=5000)
    assert not dialog.error_label.isVisible()


def test_the_grid_selection_survives_score_competency(qtbot, comp_window):  # noqa: F811
    from PySide6.QtCore import QItemSelectionModel

    window, folder, fitted = comp_window
    browser = window.show_pane("dataset_browser")
    with qtbot.waitSignal(browser.sig_opened, timeout=20000):
        browser.open_path(folder)
    controls = browser.competency
    qtbot.waitUntil(lambda: controls.estimator_key == fitted.key, timeout=20000)
    model, selection = browser.grid_model, browser.grid.selectionModel()
    for r in (1, 5, 9):
        selection.select(model.index(r, 0), QItemSelectionModel.SelectionFlag.Select)
    chosen = browser.selected_rows()
    assert len(chosen) == 3
    handle = controls.score()
    qtbot.waitUntil(lambda: not handle.active, timeout=60000)
    assert handle.state == "done" and controls.column is not None, handle.outcome.error
    assert browser.selected_rows() == chosen  # "Score competency" re-filters: the selection stays
    controls.least_first.setChecked(True)
    browser.apply_filters()  # reordered: the same images stay selected
    assert browser.selected_rows() == chosen


def test_a_caption_without_spaces_wraps_inside_its_column(qtbot):
    from test_result_view import result, show

    from nemo_desktop.gui.panes.workbench.widgets.result_view import ZWSP, breakable

    word = "Nonsense" * 30  # 240 letters and no space: what a tiny random MLLM writes
    r = result([12.0, -3.0], 0)
    r.candidates[0].hypothesis = word
    column = show(qtbot, r)
    label = column.findChild(QLabel, "hypothesis0")
    assert label.text().replace(ZWSP, "") == word  # the same text, with break opportunities
    assert label.minimumSizeHint().width() < 200  # it no longer forces its column wider than the window
    assert breakable("a short caption") == "a short caption"
