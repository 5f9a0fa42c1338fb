"""A plugin's analysis, registered through the entry point (tests/fixtures_tiny/throwaway_plugin.py), is in the
window's Analyses list (offscreen Qt) and gets its page from its entry, like the built-in ones."""
from __future__ import annotations

import sys

import pytest

from fixtures_tiny.throwaway_plugin import ANALYSIS, installed


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    yield from installed(tmp_path, monkeypatch)


def test_the_analyses_pane_lists_the_plugin_analysis_with_its_settings(throwaway, qtbot, make_window):
    from nemo_desktop.gui.panes.analyses.plugin import NAME_ROLE

    window = make_window(model_process="in-process")  # the plugin is on this process' sys.path
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("analyses")
    pane.ensure_shown_once()
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=180000)
    listed = {pane.analysis_list.item(i).data(NAME_ROLE) for i in range(pane.analysis_list.count())}
    assert ANALYSIS in listed
    pane.select_analysis(ANALYSIS)
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == ANALYSIS, timeout=180000)
    assert {"min_images", "suffix", "wait_s"} <= set(pane.form.editors)
