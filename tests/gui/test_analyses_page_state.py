"""Issue 28 §2: each Analyses page owns its result, status, progress and Cancel; a job's progress shows on the page
that started it, and the Cancel of another page never cancels it."""
from __future__ import annotations

import threading

import pytest

from test_analyses_pane import FolderCount, _pane, class_folders, folder_count  # noqa: F401 - fixtures


@pytest.fixture
def second_analysis(monkeypatch, folder_count):  # noqa: F811
    from nemo_desktop.core.registry import AnalysisSpec, Inputs
    from nemo_desktop.core.registry import registry
    from nemo_desktop.core.reports import sections

    from test_analyses_pane import FolderCountConfig, FolderCountResult

    monkeypatch.setitem(registry._SPECS, "folder-count-b", AnalysisSpec(
        "folder-count-b", "dataset", "1", FolderCount, FolderCountConfig, FolderCountResult,
        inputs=Inputs(classifier="none", data="dataset"), description="A second page (test double)."))
    monkeypatch.setitem(sections._REPORTS, ("dataset", "folder-count-b"), sections._REPORTS[("dataset", folder_count)])
    return "folder-count-b"


def _show(qtbot, pane, name):
    pane.select_analysis(name)
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == name, timeout=20000)


def test_each_page_keeps_its_own_result_status_progress_and_cancel(qtbot, make_window, folder_count,  # noqa: F811
                                                                   second_analysis, class_folders):  # noqa: F811
    window, pane = _pane(qtbot, make_window, folder_count)
    pane.data_path.setText(str(class_folders))
    FolderCount.gate = threading.Event()
    handle = pane.run()
    qtbot.waitUntil(lambda: "Counting" in pane.stage_label.text(), timeout=20000)
    assert pane.cancel_button.isEnabled()

    # The other page: none of the running job's status, progress or Cancel.
    _show(qtbot, pane, second_analysis)
    assert pane.stage_label.text() == ""
    assert not pane.cancel_button.isEnabled()
    assert pane.progress.maximum() == 1 and pane.progress.value() <= 0
    pane.cancel()  # this page's Cancel: nothing of its own to cancel
    assert not handle.cancel_requested
    assert pane.result is None and pane.result_view.toPlainText() == ""

    # Progress of the first job keeps going to its own page only.
    FolderCount.gate.set()
    qtbot.waitUntil(lambda: handle.state == "done", timeout=20000)
    qtbot.wait(200)
    assert pane.stage_label.text() == "" and pane.result is None and pane.result_view.toPlainText() == ""
    assert not pane.export_button.isEnabled()

    # Back on the first page: its result and "Done." are there.
    with qtbot.waitSignal(pane.sig_result_shown, timeout=20000, raising=False):
        _show(qtbot, pane, folder_count)
    qtbot.waitUntil(lambda: "cat: 3 images" in pane.result_view.toPlainText(), timeout=20000)
    assert pane.stage_label.text() == "Done." and pane.export_button.isEnabled()
    assert pane.result is not None

    # A failed run on the second page does not leave "Failed" on the first.
    _show(qtbot, pane, second_analysis)
    pane.data_path.setText(str(class_folders / "nope"))
    failed = pane.run()
    qtbot.waitUntil(lambda: failed.state == "failed", timeout=20000)
    qtbot.waitUntil(lambda: pane.stage_label.text().startswith("Failed"), timeout=20000)
    _show(qtbot, pane, folder_count)
    assert pane.stage_label.text() == "Done." and "cat: 3 images" in pane.result_view.toPlainText()


def test_a_pages_folder_is_its_own(qtbot, make_window, folder_count, second_analysis, class_folders):  # noqa: F811
    """The folder typed on one page is not carried to another page (a folder is not an image, issue 28 walkthrough)."""
    window, pane = _pane(qtbot, make_window, folder_count)
    pane.data_path.setText(str(class_folders))
    _show(qtbot, pane, second_analysis)
    assert pane.data_path.text() == ""
    pane.data_path.setText(str(class_folders / "cat"))
    _show(qtbot, pane, folder_count)
    assert pane.data_path.text() == str(class_folders)
    _show(qtbot, pane, second_analysis)
    assert pane.data_path.text() == str(class_folders / "cat")
