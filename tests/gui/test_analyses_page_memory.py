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
