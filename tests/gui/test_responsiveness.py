"""Work the window does for a job is spread over event-loop turns, so that one turn never stalls it for long
(benchmarks/gui_event_loop.py measures the whole window; these tests pin the mechanisms)."""
from __future__ import annotations

import threading
import time

import pytest
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

from nemo_desktop.gui.jobs import IO, RUNNING
from nemo_desktop.gui.panes.workbench.run_job import StoredSummary
from nemo_desktop.gui.panes.workbench.widgets.past_results import ROWS_PER_TURN, PastResultsTable

pytestmark = pytest.mark.gui


class TurnCounter:
    """Counts event-loop passes: a zero-interval timer fires once per pass."""

    def __init__(self):
        self.turns = 0
        self.timer = QTimer(interval=0)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def _tick(self):
        self.turns += 1


def test_jobs_that_end_together_are_handled_on_separate_turns(qtbot, runner):
    release = threading.Event()
    handles = [runner.submit(lambda ctx: release.wait(10), title=f"Job {i}", lane=IO) for i in range(2)]
    qtbot.waitUntil(lambda: all(h.state == RUNNING for h in handles), timeout=5000)
    release.set()
    time.sleep(0.3)  # the GUI thread is busy: all three end and their endings wait in Qt's queue together
    counter = TurnCounter()
    handled_on = []
    for h in handles:
        h.sig_finished.connect(lambda _o: handled_on.append(counter.turns))
    qtbot.waitUntil(lambda: len(handled_on) == 2, timeout=5000)
    counter.timer.stop()
    assert len(set(handled_on)) == 2  # each ending had an event-loop pass of its own
    assert [h.outcome.result for h in handles] == [True, True] and not runner.busy


def _summaries(n: int) -> list[StoredSummary]:
    return [StoredSummary(f"key{i}", time.time(), "scitx", f"img{i}.png", "", "cat", "dog", float(i), "Snow.",
                          {"classifier": "digits-cnn"}) for i in range(n)]


def test_a_long_past_results_list_fills_over_several_turns(qtbot):
    table = PastResultsTable()
    qtbot.addWidget(table)
    rows = _summaries(150)
    table.show_rows(rows)
    assert table.rowCount() == 150 and not table.filled
    assert table.item(ROWS_PER_TURN - 1, 4).text() == f"img{ROWS_PER_TURN - 1}.png"  # the first turn's rows
    assert table.item(ROWS_PER_TURN, 4) is None  # the rest come on later turns
    qtbot.waitUntil(lambda: table.filled, timeout=5000)
    assert [table.item(i, 4).text() for i in range(150)] == [f"img{i}.png" for i in range(150)]
    assert table.item(149, 1).text() == "+149.0" and table.item(149, 5).text() == "digits-cnn"

    # A newer listing replaces a fill still under way; a click opens the row's result.
    table.show_rows(rows)
    table.show_rows(rows[:3])
    qtbot.wait(100)
    assert table.filled and table.rowCount() == 3
    with qtbot.waitSignal(table.sig_open, timeout=1000) as opened:
        table.cellClicked.emit(2, 0)
    assert opened.args == ["key2"]


def test_a_job_that_ends_before_its_row_is_built_is_still_listed_with_its_outcome(qtbot, make_window):
    window = make_window()
    handle = window.jobs.submit(lambda ctx: 42, title="Quick listing")
    assert handle.job_id not in window.jobs_panel.rows  # built on a later turn, not inside submit()
    qtbot.waitUntil(lambda: handle.job_id in window.jobs_panel.rows and not handle.active, timeout=5000)
    row = window.jobs_panel.rows[handle.job_id]
    qtbot.waitUntil(lambda: row.stage.text() == "Done", timeout=5000)
    assert not row.cancel_button.isEnabled()


def test_inactive_windows_keep_the_active_colours(qapp):
    """Otherwise every dialog that opens repaints the whole main window (see use_one_palette_when_inactive)."""
    from PySide6.QtGui import QColor, QPalette

    from nemo_desktop.gui.app import use_one_palette_when_inactive

    saved = qapp.palette()
    try:
        palette = qapp.palette()
        palette.setColor(QPalette.ColorGroup.Inactive, QPalette.ColorRole.Highlight, QColor(1, 2, 3))
        qapp.setPalette(palette)
        assert not qapp.palette().isEqual(QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive)
        use_one_palette_when_inactive(qapp)
        assert qapp.palette().isEqual(QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive)
    finally:
        qapp.setPalette(saved)


class _PaintCounter(QObject):
    def __init__(self, widget):
        super().__init__()
        self.paints = 0
        widget.installEventFilter(self)

    def eventFilter(self, obj, event):
        self.paints += event.type() == QEvent.Type.Paint
        return False


@pytest.mark.parametrize("one_palette", [True, False])
def test_opening_a_dialog_does_not_repaint_the_windows_tables(qtbot, qapp, make_window, one_palette):
    """Item views repaint their whole viewport when their window is deactivated, which every dialog does; with
    one palette for active and inactive windows nothing would change, so they do not (with two, they must)."""
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QDialog

    from nemo_desktop.gui.app import use_one_palette_when_inactive

    saved = qapp.palette()
    try:
        use_one_palette_when_inactive(qapp)
        if not one_palette:
            palette = qapp.palette()
            palette.setColor(QPalette.ColorGroup.Inactive, QPalette.ColorRole.Highlight, QColor(1, 2, 3))
            qapp.setPalette(palette)
        window = make_window()
        window.show_pane("model_manager")
        window.show()
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow, timeout=5000)
        viewport = window.panes["model_manager"].table.viewport()
        qtbot.waitUntil(lambda: viewport.isVisible(), timeout=5000)
        counter = _PaintCounter(viewport)
        for _ in range(50):  # until the start-up repaints are over
            before = counter.paints
            qtbot.wait(300)
            if counter.paints == before:
                break
        counter.paints = 0
        dialog = QDialog(window)
        dialog.open()
        qtbot.waitUntil(lambda: not window.isActiveWindow(), timeout=5000)
        dialog.reject()
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow, timeout=5000)
        qtbot.wait(200)
        assert (counter.paints == 0) is one_palette, counter.paints
    finally:
        qapp.setPalette(saved)


def test_more_settings_are_built_when_first_shown_or_read(qtbot):
    """Building a method's ~20 hidden settings editors was most of the turn in which a diagnosis starts."""
    from PySide6.QtWidgets import QCheckBox, QSpinBox

    from nemo_desktop.core.methods.scitx import SciTXConfig
    from nemo_desktop.gui.panes.workbench.widgets.method_form import PRIMARY, MethodForm

    form = MethodForm()
    qtbot.addWidget(form)
    form.set_config(SciTXConfig, {"k": 7})
    built = {w.objectName() for kind in (QSpinBox, QCheckBox) for w in form.findChildren(kind)}
    assert "setting_k" in built and not any(n.startswith("setting_") and n[8:] not in PRIMARY for n in built)
    values = form.values()  # reading builds the rest, with the config's defaults
    assert values["k"] == 7 and set(values) > set(PRIMARY)
    defaults = SciTXConfig()
    assert all(values[name] == getattr(defaults, name) for name in values if name not in PRIMARY
               and not isinstance(getattr(defaults, name), (tuple, list)))
    form.set_config(SciTXConfig)
    form.findChild(QCheckBox, "moreSettings").setChecked(True)  # showing them builds them
    assert form.findChild(QWidget, "setting_edit_flag_threshold") is not None


def test_a_pane_shown_for_the_first_time_is_laid_out_before_it_is_painted(qtbot, make_window):
    """Qt lays out widgets shown for the first time on a later pass, after it has scheduled the pane's paint:
    painted at a stale size, laid out again, painted again. The switch lays them out at once."""
    from PySide6.QtWidgets import QSpinBox

    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    pane = window.panes["workbench"]
    pane.ensure_shown_once()  # its method form is built while the pane is hidden, as when a diagnosis starts
    qtbot.waitUntil(lambda: pane.form.findChild(QSpinBox, "setting_k") is not None, timeout=10000)
    spin = pane.form.findChild(QSpinBox, "setting_k")
    window.tabs.setCurrentWidget(pane)  # as a click on its tab; no event is handled before the check
    laid_out = spin.geometry()
    qtbot.wait(300)
    assert laid_out == spin.geometry() and spin.height() > 0


@pytest.mark.parametrize("by", ["show_pane", "tab click"])
def test_a_pane_starts_its_loading_jobs_after_its_first_paint(qtbot, make_window, by):
    """Its jobs' threads would otherwise hold the GIL while the pane's first (and costliest) paint needs it."""
    from PySide6.QtWidgets import QApplication

    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(300)  # the window's own first paint is over
    pane = window.panes["analyses"]
    assert not pane._shown_once
    loaded_at_paint = []

    class Watch(QObject):  # the pane's first paint: the first paint event of one of its widgets
        def eventFilter(self, obj, event):
            if event.type() == QEvent.Type.Paint and isinstance(obj, QWidget) and pane.isAncestorOf(obj):
                loaded_at_paint.append(pane._shown_once)
            return False

    watch = Watch()
    QApplication.instance().installEventFilter(watch)
    try:
        if by == "show_pane":
            window.show_pane("analyses")
        else:
            window.tabs.setCurrentWidget(pane)
        qtbot.waitUntil(lambda: pane._shown_once and bool(loaded_at_paint), timeout=5000)
    finally:
        QApplication.instance().removeEventFilter(watch)
    assert loaded_at_paint[0] is False
