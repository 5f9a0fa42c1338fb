"""The `nemo-desktop` entry point: options that choose the data root, and a clear start-up failure."""
from __future__ import annotations

import pytest

from nemo_desktop.core.store.paths import get_paths
from nemo_desktop.gui import app
from nemo_desktop.gui.widgets.error_dialog import ErrorDialog

pytestmark = pytest.mark.gui


def test_home_option_sets_nemo_home_before_paths_are_read(tmp_path, monkeypatch):
    args, qt_args = app.parse_args(["--home", str(tmp_path / "data"), "-platform", "offscreen"])
    app.apply_path_options(args)
    assert get_paths().config_dir == (tmp_path / "data" / "config").resolve()
    assert qt_args == ["-platform", "offscreen"]  # unknown options are Qt's


def test_portable_option_sets_nemo_portable(monkeypatch):
    monkeypatch.setenv("NEMO_PORTABLE", "0")  # recorded, so the test's change is undone afterwards
    monkeypatch.delenv("NEMO_HOME")
    args, _ = app.parse_args(["--portable"])
    app.apply_path_options(args)
    paths = get_paths()
    assert paths.portable and paths.config_dir.parts[-3:] == ("models_cache", "nemo_home", "config")


def test_portable_dir_option_sets_nemo_portable_to_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_PORTABLE", "0")
    monkeypatch.delenv("NEMO_HOME")
    args, _ = app.parse_args(["--portable-dir", str(tmp_path / "stick")])
    app.apply_path_options(args)
    paths = get_paths()
    assert paths.portable and paths.weights_dir == tmp_path / "stick"


def test_an_unusable_data_folder_gives_a_clear_error_and_exit_code(qtbot, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the data folder should be")
    shown = []
    monkeypatch.setattr(ErrorDialog, "exec", lambda self: shown.append(self.error) or 0)  # no modal loop
    assert app.main(["--home", str(blocker / "home")]) == 2
    assert shown and "cannot write" in shown[0]["message"] and "NEMO_HOME" in shown[0]["hint"]
    assert "cannot write" in capsys.readouterr().err


def test_main_runs_the_event_loop_and_exits_cleanly(tmp_path):
    """The real main(): window shown, closed by the user (here a timer), exit code 0, log says so."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication
        app = QApplication([])
        QTimer.singleShot(300, lambda: [w.close() for w in QApplication.topLevelWidgets()
                                        if w.objectName() == "mainWindow"])
        from nemo_desktop.gui.app import main
        sys.exit(main(["--home", sys.argv[1]]))
    """)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "home")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    log = (tmp_path / "home" / "logs" / "nemo.log").read_text()
    assert "starting" in log and "closed (exit code 0)" in log


def test_the_window_carries_the_shipped_application_icon(qtbot, tmp_path):
    from nemo_desktop.core.base.resources import resource_path

    _, window = app.build(["--home", str(tmp_path / "home")])
    qtbot.addWidget(window)
    icon = window.windowIcon()
    assert not icon.isNull() and icon.availableSizes()  # a real, loaded image, not an empty icon
    shipped = app.application_icon().pixmap(64, 64).toImage()
    assert icon.pixmap(64, 64).toImage() == shipped
    assert resource_path("icons", "nemo-desktop.png").stat().st_size > 1000
