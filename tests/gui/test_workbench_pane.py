"""Explanation workbench: SciTX on a misclassified digit with the digits-world models (a real CNN with a
colour shortcut, a scripted MLLM double, a PIL editor double), the result view, past results, cancelling a
run, and the report exporter on the stored result."""
from __future__ import annotations

import time

import pytest
from PySide6.QtWidgets import QFrame, QGroupBox, QLabel

from nemo_desktop.core.app.samples import Sample

pytestmark = pytest.mark.gui


def _workbench(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("workbench")
    qtbot.waitUntil(lambda: bool(pane.methods), timeout=20000)
    return pane


def _build_reference(window, folder):
    from nemo_desktop.core.data.reference_index import build_index

    return build_index(folder, window.session.get("classifier"), window.session.store())


def _texts(widget) -> str:
    return "\n".join(label.text() for label in widget.findChildren(QLabel))


def test_scitx_run_shows_sets_candidates_and_the_selected_explanation(qtbot, digits_window, digits_reference,
                                                                      blue_three, tmp_path):
    window = digits_window
    index = _build_reference(window, digits_reference)
    pane = _workbench(qtbot, window)
    qtbot.waitUntil(lambda: pane.reference_combo.findData(index.index_id) >= 0, timeout=10000)
    assert "scitx" in pane.methods and pane.method_combo.currentData() == "scitx"
    assert set(pane.form.editors) >= {"k", "m", "seed", "edit_steps", "edit_size"}
    pane.form.set_value("k", 3)
    pane.set_samples([Sample(str(blue_three), "three")], index_id=index.index_id)
    qtbot.waitUntil(lambda: pane.reference_combo.currentData() == index.index_id, timeout=10000)
    assert pane.run_button.isEnabled()

    stages = []
    with qtbot.waitSignal(pane.sig_results_shown, timeout=60000) as shown:
        handle = pane.run()
        handle.sig_progress.connect(lambda p: stages.append(p.stage))
    assert handle.state in ("running", "done")
    qtbot.waitUntil(lambda: handle.state == "done", timeout=30000)
    assert any("Captioning observations" in s for s in stages) and any("Editing image" in s for s in stages)
    assert pane.stage_label.text() == "Done."
    assert pane.live_log.count() > 0

    result = shown.args[0][0]
    assert result.method == "scitx" and result.sample.pred_name == "eight" and result.sample.true_name == "three"
    assert "blue ink" in result.explanation and result.cei > 0  # the causal hypothesis wins the test

    view = pane.result_view
    assert len(view.columns) == 1
    column = view.columns[0]
    texts = _texts(column)
    assert result.explanation in texts
    boxes = {b.objectName(): b for b in column.findChildren(QGroupBox)}
    assert {"setA", "setB", "setC"} <= set(boxes)
    assert "blue ink" in _texts(boxes["setB"]) or "blue" in _texts(boxes["setB"])  # eights are blue
    assert "red ink" in _texts(boxes["setA"])  # the reference threes are red
    chosen = column.findChildren(QFrame, "selectedCandidate")
    assert len(chosen) == 1 and "blue ink" in _texts(chosen[0])
    assert "Recolour the digit red" in _texts(chosen[0])
    assert column.findChildren(QLabel, f"image_edited_{result.selected_index}")  # counterfactual shown
    assert column.findChildren(QLabel, "image_input")
    probs = column.findChildren(QLabel, f"probs{result.selected_index}")[0].text()
    assert f"{result.candidates[result.selected_index].prob_true_before:.3f} → " in probs

    # Past results list it; opening it again shows the same result.
    qtbot.waitUntil(lambda: pane.past_table.rowCount() == 1, timeout=10000)
    with qtbot.waitSignal(pane.sig_results_shown, timeout=10000) as reopened:
        pane.past_table.cellClicked.emit(0, 0)  # as a click on the row
    assert reopened.args[0][0].explanation == result.explanation

    # Another method's result on the same image is shown beside it (one column per method).
    store = window.session.store()
    other = dict(store.get(result.result_key).payload, method="another-method", explanation="Another view.")
    store.put("another-method-result", "explanation", other)
    with qtbot.waitSignal(pane.sig_results_shown, timeout=10000) as both:
        pane._result_key = None
        pane.open_result(result.result_key)
    assert [r.method for r in both.args[0]] == ["scitx", "another-method"]
    assert [c.objectName() for c in pane.result_view.columns] == ["resultColumn_scitx", "resultColumn_another-method"]
    assert "Another view." in _texts(pane.result_view.columns[1])
    store.delete("another-method-result")

    # The report exporter lists it and exports HTML and PDF through the core engine.
    exporter = window.show_pane("report_exporter")
    qtbot.waitUntil(lambda: len(exporter.items) == 1, timeout=10000)
    exporter.select_keys([result.result_key])
    assert exporter.export_button.isEnabled()
    with qtbot.waitSignal(exporter.sig_exported, timeout=30000) as exported:
        exporter.export(exporter.selected_items(), tmp_path)
    html_file = exported.args[0][0]
    assert html_file.parent == tmp_path and html_file.suffix == ".html"
    assert "blue ink" in html_file.read_text(encoding="utf-8")
    exporter.pdf_radio.setChecked(True)
    with qtbot.waitSignal(exporter.sig_exported, timeout=60000) as exported:
        exporter.export(exporter.selected_items(), tmp_path / "diagnosis.pdf")
    assert exported.args[0][0].read_bytes()[:5] == b"%PDF-"
    assert "Wrote 1 report" in exporter.status_label.text()


def test_cancelling_a_run_stops_during_editing(qtbot, make_window, digits, blue_three):
    from digits_world import DigitsCNNClassifier, DigitsEditor, ScriptedDigitsMLLM

    class SlowEditor(DigitsEditor):
        """Test double: the PIL editor, with a pause after each diffusion step."""

        def edit(self, image, instruction, *, on_step=None, **kw):
            def slow(i, total):
                time.sleep(0.05)
                return on_step(i, total) if on_step else True
            return super().edit(image, instruction, on_step=slow, **kw)

    window = make_window(model_process="in-process")
    window.session.put("classifier", "digits-cnn", DigitsCNNClassifier(digits[0]))
    window.session.put("mllm", "scripted", ScriptedDigitsMLLM())
    window.session.put("editor", "slow", SlowEditor())
    pane = _workbench(qtbot, window)
    pane.form.set_value("edit_steps", 200)
    pane.reference_combo.setCurrentIndex(pane.reference_combo.findData(None))  # no observations
    pane.set_samples([Sample(str(blue_three), "three")])
    editing = []
    handle = pane.run()
    handle.sig_progress.connect(lambda p: editing.append(p) if "Editing" in p.stage and p.done > 2 else None)
    qtbot.waitUntil(lambda: bool(editing), timeout=30000)
    assert pane.cancel_button.isEnabled()
    with qtbot.waitSignal(handle.sig_cancelled, timeout=20000):
        pane.cancel_button.click()
    assert editing[-1].done < 200
    assert pane.stage_label.text().startswith("Cancelled")
    assert pane.run_button.isEnabled() and not pane.cancel_button.isEnabled()
