"""Model manager, issue 40: the memory profile (which one fits this machine, why a chosen one cannot, saved and
used by the model process's loads) and a local OpenAI-compatible server as the captioning model in one step."""
from __future__ import annotations

import json
import re

import pytest

from fixtures_tiny.openai_server import LoopbackOpenAI, closed_port_url

pytestmark = pytest.mark.gui


def _panel(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    panel = window.show_pane("model_manager").speed_panel
    qtbot.waitUntil(lambda: panel.settings is not None, timeout=20000)
    return panel


def _saved(home):
    return json.loads((home / "config" / "settings.json").read_text())


def _wait(qtbot, handle, signal="sig_done", timeout=60000):
    with qtbot.waitSignal(getattr(handle, signal), timeout=timeout) as blocker:
        pass
    return blocker.args[0] if blocker.args else None


def test_the_memory_profile_is_advised_saved_and_used_by_the_model_process(qtbot, make_window, gui_home):
    window = make_window()  # the model process (the default): the advice and the loads run there
    panel = _panel(qtbot, window)
    qtbot.waitUntil(lambda: panel.advice is not None, timeout=60000)
    assert re.search(r"This computer fits the '(80 GB|48 GB|24 GB|CPU)' profile \(.+\)", panel.profile_note.text())
    assert panel.chosen_profile() is None
    no_gpu = panel.advice["fits"] == "CPU" and panel.advice["why"] == "no CUDA GPU was found"

    panel.profile_combo.setCurrentIndex(panel.profile_combo.findData("24 GB"))
    handle = panel.save_profile()
    _wait(qtbot, handle)
    assert _saved(gui_home)["compute"]["memory_profile"] == "24 GB"
    qtbot.waitUntil(lambda: panel.advice is not None and panel.advice["chosen"] == "24 GB", timeout=60000)
    if no_gpu:  # this machine (CI has no GPU): the choice cannot fit, said in words, and a load is refused
        assert panel.profile_note.text().startswith("The '24 GB' profile cannot fit: The '24 GB' profile needs a "
                                                    "CUDA GPU, and none was found.")
        assert "This computer fits the 'CPU' profile (no CUDA GPU was found)." in panel.profile_note.text()
        pane = window.show_pane("model_manager")
        error = _wait(qtbot, pane.load("classifier", "resnet50"), "sig_failed")
        assert "The '24 GB' profile needs a CUDA GPU" in error["message"]

    again = _panel(qtbot, make_window())  # remembered
    assert again.chosen_profile() == "24 GB"
    again.profile_combo.setCurrentIndex(0)
    _wait(qtbot, again.save_profile())
    assert _saved(gui_home)["compute"]["memory_profile"] is None


def test_a_local_server_url_is_checked_remembered_and_becomes_the_captioning_model(qtbot, make_window, gui_home):
    from nemo_desktop.core.models.protocols import ChatMessage

    server = LoopbackOpenAI().start()
    web = LoopbackOpenAI(html=True).start()
    try:
        window = make_window(model_process="in-process")  # the test talks to the session's MLLM object
        panel = _panel(qtbot, window)
        panel.server_edit.setText(server.url + "/")
        _wait(qtbot, panel.use_server())
        assert panel.server_status.text() == (f"{server.url} answers (vllm) and serves tiny/vl-model. It is now the "
                                              "default captioning model.")
        saved = _saved(gui_home)
        assert saved["models"]["mllm"] == "endpoint:local-server"
        assert saved["endpoints"] == [{"name": "local-server", "base_url": server.url, "model": "tiny/vl-model",
                                       "api_key_env": None}]
        qtbot.waitUntil(lambda: window.session.loaded().get("mllm") == "endpoint:local-server", timeout=20000)
        reply = window.session.get("mllm").chat([ChatMessage("user", ["a red car"])])
        assert reply == "tiny/vl-model heard: a red car"
        settings_panel = window.show_pane("model_manager").settings_panel
        qtbot.waitUntil(lambda: settings_panel.endpoints_table.rowCount() == 1, timeout=10000)

        # Errors in words; nothing saved.
        dead = closed_port_url()
        panel.server_edit.setText(dead)
        _wait(qtbot, panel.use_server(), "sig_failed")
        assert panel.server_status.text().startswith(f"Nothing answers at {dead}")
        panel.server_edit.setText(web.url)
        _wait(qtbot, panel.use_server(), "sig_failed")
        assert "answers, but not as an OpenAI-compatible API" in panel.server_status.text()
        panel.server_edit.setText("")
        assert panel.use_server() is None and "Enter the server's URL" in panel.server_status.text()
        assert _saved(gui_home)["endpoints"][0]["base_url"] == server.url

        again = _panel(qtbot, make_window(model_process="in-process"))
        assert again.server_edit.text() == server.url
        assert again.server_status.text() == (f"Remembered: tiny/vl-model at {server.url}, the default captioning "
                                              "model.")

        # Another server under the same endpoint name: the MLLM in memory is replaced, not kept.
        moved = LoopbackOpenAI(models=("tiny/other",)).start()
        try:
            panel.server_edit.setText(moved.url)
            _wait(qtbot, panel.use_server())
            qtbot.waitUntil(lambda: getattr(window.session.get("mllm"), "base_url", None) == moved.url,
                            timeout=20000)
            assert window.session.get("mllm").chat([ChatMessage("user", ["hi"])]) == "tiny/other heard: hi"
        finally:
            moved.stop()
    finally:
        server.stop()
        web.stop()
