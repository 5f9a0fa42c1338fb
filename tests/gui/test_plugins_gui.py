"""The app and plugins (core/base/plugins.py): the tiny plugin distribution's analyses reach the app's lists
(tests/core/test_plugins.py), and a skipped plugin is named in the status bar."""
from __future__ import annotations

import sys

import pytest

from fixtures_tiny.plugin_dist import write_plugin_dist

pytestmark = pytest.mark.gui


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    from nemo_desktop.core.base import plugins

    monkeypatch.syspath_prepend(str(write_plugin_dist(tmp_path / "site")))
    plugins._reset_for_tests()
    yield
    plugins._reset_for_tests()
    for mod in [m for m in sys.modules if m.startswith("nemo_tiny_plugin")]:
        del sys.modules[mod]


def test_the_window_names_a_skipped_plugin(plugin, qtbot, make_window, monkeypatch):
    """The window loads the plugins while idle after its first paint, and says which it skipped."""
    from nemo_desktop.gui import main_window

    monkeypatch.setattr(main_window, "WARM_UP_DELAY_MS", 0)
    window = make_window()
    window.show()
    qtbot.waitUntil(lambda: "broken-family" in window.statusBar().currentMessage(), timeout=30000)
    message = window.statusBar().currentMessage()
    assert "Skipped plugin 'broken-family' (from nemo-tiny-plugin)" in message and "broken-analysis" in message
