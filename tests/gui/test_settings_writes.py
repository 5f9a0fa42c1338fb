"""The window never waits for the disk when it remembers a dataset or the loaded models.

QSettings.sync() (which Qt also runs by itself on the turn after a setValue) takes `gui.ini.lock` and
fdatasyncs twice. When an indexing ended in the model worker, the dataset shown (recent datasets) and the
"models changed" it emits (last models) each wrote gui.ini on the GUI thread, behind the worker's store writes:
a 420 ms stall in benchmarks/gui_event_loop.py. Here another process holds gui.ini's lock and every fsync is
slow, so a write on the GUI thread (or one that holds the GIL) would stall the window.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from PIL import Image
from PySide6.QtCore import QSettings, QTimer

from nemo_desktop.gui.first_run import memory
from nemo_desktop.gui.settings import BackgroundSettings

FSYNC_S = 3.0
HOLD_S = 2 * FSYNC_S
# Takes the QLockFile that QSettings.sync() takes, in another process, and keeps it for argv[2] seconds.
HOLDER = r"""
import sys, time
from PySide6.QtCore import QLockFile
lock = QLockFile(sys.argv[1])
if not lock.tryLock(0):
    sys.exit("could not take the lock")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.unlock()
"""


def _hold_lock(settings_file: str, seconds: float) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, settings_file + ".lock", str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


class _Gaps:
    """The longest gap between the ticks of a 5 ms timer in the GUI thread."""

    def __init__(self):
        self.longest, self._last = 0.0, time.perf_counter()
        self.timer = QTimer(interval=5)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.longest, self._last = max(self.longest, now - self._last), now


def _dataset(root):
    for name, colour in (("cat", "red"), ("dog", "blue")):
        (root / name).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (16, 16), colour).save(root / name / f"{i}.png")
    return root


def test_recent_datasets_and_last_models_never_wait_on_the_disk(qtbot, make_window, tmp_path, monkeypatch):
    window = make_window(model_process="in-process")  # the settings writes are the same in both modes
    fr, browser = window.first_run, window.panes["dataset_browser"]
    qtbot.wait(200)  # the window's own start-up writes (gui.ini's layout version) are done
    dataset = _dataset(tmp_path / "data")
    real_fsync = os.fsync

    def slow_fsync(fd):  # a disk busy with the model worker's store writes
        time.sleep(FSYNC_S)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    holder = _hold_lock(window.settings.fileName(), HOLD_S)  # and gui.ini locked meanwhile
    try:
        held_at, gaps = time.perf_counter(), _Gaps()
        window.sig_models_changed.emit()  # as an indexing job's end does: remembers the last models
        with qtbot.waitSignal(browser.sig_opened, timeout=30000):  # the shown dataset becomes a recent one
            browser.open_path(dataset)
        qtbot.wait(100)  # Qt's own sync of a QSettings would run on one of these turns
        gaps.timer.stop()
        assert gaps.longest < 1.0, f"the GUI thread waited {gaps.longest:.2f} s for the disk or gui.ini's lock"
        assert time.perf_counter() - held_at < FSYNC_S, "the test outlived the slow disk: it proves nothing"
        # Read back at once, though not on disk yet.
        assert memory.recent_datasets(fr.settings)[0] == str(dataset)
        assert memory.remembered_models(fr.settings) == {}
        assert not fr.settings.path.exists()
    finally:
        holder.wait(HOLD_S + 10)
    assert fr.settings.flush(4 * FSYNC_S + 10)
    monkeypatch.setattr(os, "fsync", real_fsync)
    on_disk = BackgroundSettings(fr.settings.path)
    assert memory.recent_datasets(on_disk)[0] == str(dataset)
    assert memory.remembered_models(on_disk) == {} and on_disk.value(memory.MODELS_KEY) == "{}"
    assert QSettings(window.settings.fileName(), QSettings.Format.IniFormat).value(memory.RECENT_KEY) is None


def test_background_settings_keep_the_latest_value_and_read_older_ones_from_gui_ini(qapp, tmp_path):
    legacy = QSettings(str(tmp_path / "gui.ini"), QSettings.Format.IniFormat)
    legacy.setValue(memory.RECENT_KEY, json.dumps(["/data/old"]))  # where an earlier version kept it
    legacy.sync()
    settings = BackgroundSettings(tmp_path / "gui-state.json", legacy=legacy)
    assert memory.recent_datasets(settings) == ["/data/old"]
    for i in range(50):
        settings.setValue("k/v", str(i))
        assert settings.value("k/v") == str(i)
    memory.add_recent_dataset(settings, "/data/new")
    assert settings.close(10)
    again = BackgroundSettings(tmp_path / "gui-state.json")
    assert again.value("k/v") == "49" and memory.recent_datasets(again) == ["/data/new", "/data/old"]
    settings.setValue("k/v", "after close")  # written at once when closed (a job that ended after the window)
    assert BackgroundSettings(tmp_path / "gui-state.json").value("k/v") == "after close"
