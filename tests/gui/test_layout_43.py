"""Issue 43 §3: at 1280×800 the first window fits the screen with its title bar, and the Jobs dock shows four
jobs whole."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from PySide6.QtCore import QRect

ROOT = Path(__file__).resolve().parents[2]


def test_the_first_window_fits_an_800_px_screen_with_its_title_bar():
    from nemo_desktop.gui.window_size import BORDER_RESERVE as B, PREFERRED, TITLE_BAR_RESERVE, initial_geometry

    for available in (QRect(0, 0, 1280, 800), QRect(0, 27, 1280, 773), QRect(1920, 0, 1366, 768)):
        g = initial_geometry(available)
        frame = g.adjusted(-B, -TITLE_BAR_RESERVE, B, B)  # the client area plus a title bar and borders
        assert available.contains(frame), (available, g)
        assert g.width() <= PREFERRED.width() and g.height() <= PREFERRED.height()
    big = initial_geometry(QRect(0, 0, 2560, 1440))
    assert (big.width(), big.height()) == (PREFERRED.width(), PREFERRED.height())


def test_the_main_window_opens_inside_a_1280x800_screen(tmp_path):
    """The real window on an offscreen screen of 1280×800 (Qt's offscreen platform takes the screen's size from
    a JSON file): its frame and every visible widget lie inside the screen's available geometry."""
    config = tmp_path / "screen.json"
    config.write_text('{"screens": [{"name": "s", "x": 0, "y": 0, "width": 1280, "height": 800, '
                      '"logicalDpi": 96, "dpr": 1}]}')
    script = (
        "import sys\n"
        "from PySide6.QtWidgets import QApplication, QWidget\n"
        "app = QApplication(sys.argv)\n"
        "from nemo_desktop.gui.main_window import MainWindow\n"
        "from nemo_desktop.gui.window_size import TITLE_BAR_RESERVE\n"
        "w = MainWindow(welcome=False)\n"
        "w.show(); app.processEvents()\n"
        "avail = app.primaryScreen().availableGeometry()\n"
        "g = w.geometry()\n"
        "assert avail.size().toTuple() == (1280, 800), avail\n"
        "assert g.top() - TITLE_BAR_RESERVE >= avail.top() and g.bottom() + 4 <= avail.bottom(), (g, avail)\n"
        "assert g.left() >= avail.left() and g.right() <= avail.right(), (g, avail)\n"
        "sb = w.statusBar()\n"
        "assert sb.isVisible() and sb.mapTo(w, sb.rect().bottomLeft()).y() < w.height()\n"
        "w.jobs.shutdown(5000)\n"
        "print('fits', g.width(), g.height())\n")
    env = {**__import__("os").environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fits 1200 760" in done.stdout, done.stdout


def test_the_jobs_dock_shows_four_jobs_whole(qtbot, make_window):
    from nemo_desktop.gui.jobs import IO

    window = make_window()
    window.resize(1280, 760)
    window.show()
    qtbot.waitExposed(window)
    panel = window.jobs_panel
    gate = threading.Event()
    handles = [window.jobs.submit(lambda ctx: gate.wait(20), title=f"Job {i}", lane=IO) for i in range(5)]
    try:
        qtbot.waitUntil(lambda: all(h.job_id in panel.rows for h in handles), timeout=20000)
        qtbot.wait(200)
        viewport = panel.scroll.viewport()
        shown = []
        for h in handles:
            row = panel.rows[h.job_id]
            top = row.mapTo(viewport, row.rect().topLeft()).y()
            bottom = row.mapTo(viewport, row.rect().bottomLeft()).y()
            shown.append(top >= 0 and bottom < viewport.height())
        assert sum(shown) >= 4, (shown, viewport.height(), [panel.rows[h.job_id].height() for h in handles])
    finally:
        gate.set()
    qtbot.waitUntil(lambda: not panel.rows, timeout=20000)
