"""Export where the result is (issue 19): an Export button in the result view, and Ctrl+E exports the result on
screen; the report comes from the core engine (HTML or PDF by the file's extension)."""
from __future__ import annotations

import pytest
from PIL import Image
from PySide6.QtGui import QKeySequence

pytestmark = pytest.mark.gui


def _store_result(store, tmp_path):
    from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, SampleInfo

    top = [ClassScore(1, "eight", 0.9), ClassScore(0, "three", 0.1)]
    r = ExplanationResult("scitx", SampleInfo(str(tmp_path / "query.png"), "abc", 0, "three", 1, "eight", 0.1, 0.9,
                                              top, image_artifact="input"),
                          explanation="The digit is drawn in blue ink.", selected_index=0, cei=42.0,
                          candidates=[Candidate("The digit is drawn in blue ink.", "image", "Recolour the digit red",
                                                "edited_0", 0.1, 0.52, 42.0)])
    img = Image.new("RGB", (32, 32), (20, 40, 200))
    store.put("export-me", "explanation", r.to_dict(), {"input": img, "edited_0": img})
    return "export-me"


def _workbench_with_result(qtbot, make_window, tmp_path):
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    key = _store_result(window.session.store(), tmp_path)
    pane = window.show_pane("workbench")
    assert not pane.export_button.isEnabled()  # nothing on screen yet
    with qtbot.waitSignal(pane.sig_results_shown, timeout=10000):
        pane.open_result(key)
    assert pane.export_button.isEnabled()
    return window, pane


def test_export_button_writes_the_shown_result(qtbot, make_window, tmp_path):
    window, pane = _workbench_with_result(qtbot, make_window, tmp_path)
    target = tmp_path / "out" / "shown.pdf"
    target.parent.mkdir()
    handle = pane.export_shown(target)
    with qtbot.waitSignal(handle.sig_done, timeout=60000):
        pass
    assert target.read_bytes()[:5] == b"%PDF-"
    assert pane.export_status.text() == f"Wrote {target}"


def test_ctrl_e_exports_what_is_on_screen(qtbot, make_window, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    window, pane = _workbench_with_result(qtbot, make_window, tmp_path)
    target = tmp_path / "ctrl-e.html"
    asked = []

    def save_dialog(*args, **kw):
        asked.append(args[1])
        return str(target), "HTML report (*.html)"

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save_dialog))
    assert window.action_export_report.shortcut() == QKeySequence("Ctrl+E")
    window.action_export_report.trigger()
    qtbot.waitUntil(target.exists, timeout=30000)
    qtbot.waitUntil(lambda: pane.export_status.text().startswith("Wrote"), timeout=10000)
    assert asked == ["Export this result"]
    assert "blue ink" in target.read_text(encoding="utf-8")
    assert window.current_pane() is pane  # exported in place: no detour through the Report exporter
