"""GUI tests run offscreen (no display needed) with NEMO_HOME in a temporary folder."""
from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def gui_home(tmp_path, monkeypatch):
    """Settings, window layout and logs of each test live in its own NEMO_HOME."""
    home = tmp_path / "nemo_home"
    monkeypatch.setenv("NEMO_HOME", str(home))
    monkeypatch.delenv("NEMO_PORTABLE", raising=False)
    return home


@pytest.fixture
def runner(qtbot):
    from nemo_desktop.gui.jobs import JobRunner

    r = JobRunner(io_threads=2)
    yield r
    assert r.shutdown(5000), f"test jobs did not stop: {r.active_jobs()}"


@pytest.fixture
def make_window(qtbot):
    """Build main windows; their jobs are stopped before pytest-qt closes them."""
    windows = []

    def make():
        from nemo_desktop.gui.main_window import MainWindow

        window = MainWindow()
        qtbot.addWidget(window)
        windows.append(window)
        return window

    yield make
    for window in windows:
        assert window.jobs.shutdown(5000), f"test jobs did not stop: {window.jobs.active_jobs()}"
