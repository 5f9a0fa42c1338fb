"""Issue 43 §1: each Analyses page keeps every setting, its models, its folder and its last result across page
switches and across a restart (competency-bench's Seed, model-diff's second classifier and condition source,
fix's Targeted data and Affected classes)."""
from __future__ import annotations

import pytest

from test_analyses_pane import FolderCount, _pane, class_folders, folder_count  # noqa: F401 - fixtures


def _show(qtbot, pane, name):
    pane.select_analysis(name)
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == name and bool(pane.form.editors),
                    timeout=60000)


def _choose(box, data):
    i = box.findData(data)
    assert i >= 0, [box.itemData(j) for j in range(box.count())]
    box.setCurrentIndex(i)


def _set_pages(qtbot, pane, class_folders):  # noqa: F811
    _show(qtbot, pane, "competency-bench")
    pane.form.set_value("seed", 7)
    pane.data_path.setText(str(class_folders))
    _show(qtbot, pane, "model-diff")
    b = pane._model_boxes["classifier_b"]
    second = b.itemData(b.count() - 1)  # a catalog classifier (not "(none)")
    _choose(b, second)
    _choose(pane._model_boxes["generator"], "digits-ink")
    _show(qtbot, pane, "fix")
    pane.form.set_value("data", "augment")
    pane.form.set_value("affected_classes", "three, eight")
    return second


def _check_pages(qtbot, pane, class_folders, second):  # noqa: F811
    _show(qtbot, pane, "competency-bench")
    assert pane.form.values()["seed"] == 7
    assert pane.data_path.text() == str(class_folders)
    _show(qtbot, pane, "model-diff")
    assert pane.chosen_models()["classifier_b"] == second
    assert pane.chosen_models()["generator"] == "digits-ink"
    _show(qtbot, pane, "fix")
    values = pane.form.values()
    assert values["data"] == "augment" and values["affected_classes"] == "three, eight"


def test_settings_models_and_folder_survive_a_page_switch_and_a_restart(qtbot, make_window, gui_home,
                                                                        class_folders):  # noqa: F811
    window, pane = _pane(qtbot, make_window, "competency-bench")
    second = _set_pages(qtbot, pane, class_folders)
    _check_pages(qtbot, pane, class_folders, second)  # page switches

    window.save_layout()  # what closing the window does
    window2, pane2 = _pane(qtbot, make_window, "global-explanation")
    _check_pages(qtbot, pane2, class_folders, second)  # a restart


def test_the_last_result_is_shown_again_after_a_restart(qtbot, make_window, folder_count, class_folders,  # noqa: F811
                                                        monkeypatch):
    """A stored result (its key) is read back from the results store and rendered as when it finished."""
    from test_analyses_pane import FolderCountResult

    def stored_call(self, folder, ctx):  # the test double, storing its result as real analyses do
        result = original(self, folder, ctx)
        result.key = "folder-count-key"
        self_store.put(result.key, "folder-count", {**result.to_dict(), "kind": "dataset",
                                                    "analysis": "folder-count"})
        return result

    original = FolderCount.__call__
    monkeypatch.setattr(FolderCount, "__call__", stored_call)
    window, pane = _pane(qtbot, make_window, folder_count)
    self_store = window.session.store()
    pane.data_path.setText(str(class_folders))
    with qtbot.waitSignal(pane.sig_result_shown, timeout=20000):
        pane.run()
    assert "cat: 3 images" in pane.result_view.toPlainText()
    window.save_layout()

    window2, pane2 = _pane(qtbot, make_window, "global-explanation")
    with qtbot.waitSignal(pane2.sig_result_shown, timeout=20000):
        _show(qtbot, pane2, folder_count)
    assert isinstance(pane2.result, FolderCountResult)
    assert "cat: 3 images" in pane2.result_view.toPlainText()
    assert pane2.export_button.isEnabled() and pane2.data_path.text() == str(class_folders)


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"fix": {"values": {"data": "no-such-mode"}}}'])
def test_unreadable_remembered_settings_start_from_the_defaults(qtbot, make_window, text):
    window = make_window(model_process="in-process")
    window.settings.setValue("panes/analyses/pages", text)
    window.settings.sync()
    window2, pane = _pane(qtbot, make_window, "fix")
    assert pane.form.values()["data"] in ("edit", "augment", "none")


def _kept_on_disk(window) -> dict:
    """The pages' remembered inputs as the settings files on disk hold them now ({} when not yet written): the
    window's gui-state.json, else gui.ini (read by a QSettings of its own, as the next window would)."""
    import json

    from PySide6.QtCore import QSettings

    from nemo_desktop.gui.panes.analyses.page_memory import from_settings
    from nemo_desktop.gui.settings import FILE_NAME, STATE_FILE_NAME

    state = window.paths.config_dir / STATE_FILE_NAME
    text = json.loads(state.read_text(encoding="utf-8")).get("panes/analyses/pages") if state.exists() else None
    if text is None:
        text = QSettings(str(window.paths.config_dir / FILE_NAME), QSettings.Format.IniFormat).value(
            "panes/analyses/pages")
    return from_settings(text)


def test_a_changed_setting_is_written_before_any_close_and_survives_a_crash(qtbot, make_window, gui_home,
                                                                             class_folders):  # noqa: F811
    """Written once the user pauses (no page switch, no close): a window that then dies loses nothing."""
    window, pane = _pane(qtbot, make_window, "competency-bench")
    qtbot.waitUntil(lambda: bool(pane.form.editors), timeout=60000)
    pane.form.editors["seed"][1].setValue(7)  # as a user's typing does (a signal, not set_value)
    pane.data_path.setText(str(class_folders))
    qtbot.waitUntil(lambda: _kept_on_disk(window).get("competency-bench", {}).get("values", {}).get("seed") == 7,
                    timeout=10000)
    assert _kept_on_disk(window)["competency-bench"]["data_text"] == str(class_folders)

    window2, pane2 = _pane(qtbot, make_window, "global-explanation")  # no save_layout: as after a crash
    _show(qtbot, pane2, "competency-bench")
    assert pane2.form.values()["seed"] == 7 and pane2.data_path.text() == str(class_folders)


def test_leaving_a_page_writes_its_settings_at_once(qtbot, make_window, gui_home, monkeypatch):
    """The page left is written as it is left, not after the pause a changed setting waits for."""
    from nemo_desktop.gui.panes.analyses import page_memory

    monkeypatch.setattr(page_memory, "WRITE_DELAY_MS", 600_000, raising=False)  # only leaving can write
    window, pane = _pane(qtbot, make_window, "model-diff")
    b = pane._model_boxes["classifier_b"]
    second = b.itemData(b.count() - 1)
    _choose(b, second)
    _show(qtbot, pane, "fix")
    window.background_settings.flush()
    assert _kept_on_disk(window)["model-diff"]["models"]["classifier_b"] == second
