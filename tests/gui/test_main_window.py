"""Main window: panes, shortcuts, saved layout, status area, drops, error reporting, closing with jobs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from gui_drops import simulate_drop
from gui_job_functions import fail_to_load, loop_until_cancelled
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QMessageBox

from nemo_desktop.gui.dialogs.diagnose import DiagnoseDialog
from nemo_desktop.gui.jobs import CANCELLED, RUNNING
from nemo_desktop.gui.panes import Pane
from nemo_desktop.gui.widgets.error_dialog import ErrorDialog

pytestmark = pytest.mark.gui

PANE_TITLES = ["Model manager", "Dataset browser", "Explanation workbench", "Analyses", "Report exporter"]


def _shown(qtbot, window):
    window.show()
    qtbot.waitExposed(window)

    def active() -> bool:  # asked again while waiting: offscreen, a request made as the last window closed can be lost
        if not window.isActiveWindow():
            window.activateWindow()
        return window.isActiveWindow()

    qtbot.waitUntil(active, timeout=5000)  # shortcuts only reach the active window
    return window


def _png(path, color="red"):
    image = QImage(16, 12, QImage.Format.Format_RGB32)
    image.fill(QColor(color))
    assert image.save(str(path), "PNG")
    return path


def _visible(window, cls):
    return [w for w in window.findChildren(cls) if w.isVisible()]


def test_window_opens_with_its_panes(qtbot, make_window):
    window = _shown(qtbot, make_window())
    assert window.windowTitle() == "NEMO Desktop"
    assert [window.tabs.tabText(i) for i in range(window.tabs.count())] == PANE_TITLES
    assert all(isinstance(window.tabs.widget(i), Pane) for i in range(5))
    assert list(window.panes) == ["model_manager", "dataset_browser", "workbench", "analyses", "report_exporter"]


def test_ctrl_2_switches_to_the_dataset_browser(qtbot, make_window):
    window = _shown(qtbot, make_window())
    assert window.current_pane().NAME == "model_manager"
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert window.current_pane().NAME == "dataset_browser"
    qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    assert window.current_pane().NAME == "report_exporter"
    assert window.pane_actions[4].isChecked()


def test_layout_is_restored_in_the_next_window(qtbot, make_window, gui_home):
    first = _shown(qtbot, make_window())
    first.resize(700, 520)
    first.show_pane("workbench")
    first.jobs_dock.hide()
    assert first.close()
    assert (gui_home / "config" / "gui.ini").is_file()  # under NEMO_HOME, not the user's real config

    second = _shown(qtbot, make_window())
    assert (second.width(), second.height()) == (700, 520)
    assert second.current_pane().NAME == "workbench"
    assert not second.jobs_dock.isVisible()


def test_status_area_lists_a_running_job_and_its_cancel_button_stops_it(qtbot, make_window):
    window = _shown(qtbot, make_window())
    handle = window.jobs.submit(loop_until_cancelled, title="Indexing test images")
    with qtbot.waitSignal(handle.sig_progress, timeout=5000):
        pass
    qtbot.wait(100)
    row = window.jobs_panel.rows[handle.job_id]
    assert row.title.text() == "Indexing test images"
    assert row.stage.text().startswith("Looping (")
    assert row.bar.maximum() > 0
    assert window.jobs_summary.text() == "1 job running"
    with qtbot.waitSignal(handle.sig_cancelled, timeout=5000):
        qtbot.mouseClick(row.cancel_button, Qt.MouseButton.LeftButton)
    assert row.stage.text() == "Cancelled"
    assert window.jobs_summary.text() == "No jobs running"


def test_dropping_a_non_image_file_says_why(qtbot, make_window, tmp_path):
    window = _shown(qtbot, make_window())
    notes = tmp_path / "notes.txt"
    notes.write_text("not a picture")
    entered, dropped, _mime = simulate_drop(window, [notes])
    assert entered and dropped
    qtbot.waitUntil(lambda: bool(_visible(window, QMessageBox)), timeout=5000)
    box = _visible(window, QMessageBox)[0]
    assert box.windowTitle() == "Nothing to diagnose"
    assert "notes.txt: not an image file" in box.text()
    assert not _visible(window, DiagnoseDialog)


def test_dropping_images_and_a_folder_opens_the_diagnose_dialog(qtbot, digits_window, tmp_path):
    window = _shown(qtbot, digits_window)
    folder = tmp_path / "batch"
    folder.mkdir()
    _png(folder / "b.png", "blue")
    _png(folder / "a.png", "green")
    (folder / "readme.md").write_text("ignored: only images inside a folder are used")
    single = _png(tmp_path / "cat.png")
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    simulate_drop(window, [single, folder, notes])
    qtbot.waitUntil(lambda: bool(_visible(window, DiagnoseDialog)), timeout=5000)
    dialog = _visible(window, DiagnoseDialog)[0]
    assert [dialog.file_list.item(i).text() for i in range(dialog.file_list.count())] == ["cat.png", "a.png", "b.png"]
    assert "notes.txt" in dialog.skipped_label.text()
    assert dialog.windowTitle() == "Diagnose 3 images"
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=20000)  # classified by the current classifier
    assert [p.path for p in dialog.report.images] == [str(single), str(folder / "a.png"), str(folder / "b.png")]
    assert "test-double:digits-cnn" in dialog.status_label.text()
    assert dialog.same_for_all.isVisible() and not dialog.diagnose_button.isEnabled()


def test_a_failed_job_is_never_silent(qtbot, make_window):
    window = _shown(qtbot, make_window())
    window.jobs.submit(fail_to_load, title="Load model")
    qtbot.waitUntil(lambda: bool(_visible(window, ErrorDialog)), timeout=5000)
    dialog = _visible(window, ErrorDialog)[0]
    assert dialog.message_label.text() == "The classifier could not be loaded."
    assert "header too short" in dialog.details.toPlainText()


def test_menu_actions_open_a_dataset_and_ask_what_to_export(qtbot, make_window, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    for cls, color in (("cat", "red"), ("dog", "blue")):
        (tmp_path / "data" / cls).mkdir(parents=True)
        _png(tmp_path / "data" / cls / "1.png", color)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(tmp_path / "data"))
    window = _shown(qtbot, make_window())
    browser = window.panes["dataset_browser"]
    with qtbot.waitSignal(browser.sig_opened, timeout=10000):
        window.action_open_dataset.trigger()
    assert window.current_pane() is browser and browser.grid_model.rowCount() == 2

    window.action_export_report.trigger()  # nothing picked yet: it says what to do, no file dialog
    assert window.current_pane().NAME == "report_exporter"
    box = _visible(window, QMessageBox)[0]
    assert "Select one or more stored results" in box.text()


def test_about_names_the_version_and_the_paths_in_use(qtbot, make_window, gui_home):
    from nemo_desktop import __version__

    window = _shown(qtbot, make_window())
    window.action_about.trigger()
    box = window.findChild(QMessageBox, "aboutBox")
    assert box is not None and box.isVisible()
    assert __version__ in box.text() and str(gui_home / "logs") in box.text()


def test_closing_with_a_running_job_asks_cancels_and_waits(qtbot, make_window, monkeypatch):
    window = _shown(qtbot, make_window())
    handle = window.jobs.submit(loop_until_cancelled, title="Diagnose")
    with qtbot.waitSignal(handle.sig_progress, timeout=5000):
        pass
    answers = [False, True]
    asked = []
    monkeypatch.setattr(window, "confirm_stop_jobs", lambda jobs: asked.append(jobs) or answers.pop(0))

    assert not window.close()  # "No": the window stays and the job keeps running
    assert window.isVisible() and handle.state == RUNNING

    assert window.close()  # "Yes": cancelled, and the window waited for it to stop
    assert len(asked) == 2 and asked[0] == [handle]
    assert handle.state == CANCELLED and not window.jobs.busy


def test_closing_during_housekeeping_jobs_does_not_ask(qtbot, make_window, monkeypatch):
    window = _shown(qtbot, make_window())
    handle = window.jobs.submit(loop_until_cancelled, title="Reading the catalog", ask_before_quit=False)
    with qtbot.waitSignal(handle.sig_progress, timeout=5000):
        pass
    monkeypatch.setattr(window, "confirm_stop_jobs", lambda jobs: pytest.fail(f"asked about {jobs}"))
    assert window.close()
    assert handle.state == CANCELLED


def test_window_start_imports_no_heavy_ml_library(tmp_path):
    """A fresh interpreter builds and shows the real window (via --home) without torch & co."""
    home = tmp_path / "via_option"
    code = textwrap.dedent("""
        import json, os, sys
        from nemo_desktop.gui.app import build
        app, window = build(["--home", sys.argv[1]])
        window.show()
        app.processEvents()
        heavy = [m for m in ("torch", "transformers", "diffusers", "timm", "open_clip", "torchvision")
                 if m in sys.modules]
        print(json.dumps({"heavy": heavy, "home": os.environ["NEMO_HOME"], "panes": window.tabs.count()}))
        window.close()
    """)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    env.pop("NEMO_HOME", None)
    proc = subprocess.run([sys.executable, "-c", code, str(home)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"heavy": [], "home": str(home.resolve()), "panes": 5}
    assert "NEMO Desktop" in (home / "logs" / "nemo.log").read_text()  # logging went under --home
    assert (home / "config" / "gui.ini").is_file()
