"""Shared by the GUI tests of failure-mode actions: a stored failure-modes result shown on the Analyses page."""
from __future__ import annotations


def show_failure_modes_result(qtbot, window, result):
    """Show `window`, open the failure-modes page and hand it `result` as a finished run of that page would; returns
    the Analyses pane."""
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("analyses")
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=30000)
    pane.select_analysis("failure-modes")
    qtbot.waitUntil(lambda: pane.shown_name() == "failure-modes", timeout=30000)
    with qtbot.waitSignal(pane.sig_result_shown, timeout=30000):
        pane._on_done("failure-modes", result)
    return pane
