"""Compare models in the GUI: the workbench's "Compare models…" opens the Analyses pane's model-diff page; while it
runs, the live panel gains one table row and one curve point per Optimization iteration (from the run's partial
results); the result page exports the differences and the scores as CSV, the files `nemo compare run --csv` writes.

The real model-diff analysis on two small digit classifiers trained here and the digits condition source, with
the instant LLM double that reads only the prompts it is sent (tests/fixtures_tiny/model_diff_llms.py)."""
from __future__ import annotations

import csv

import pytest

pytestmark = pytest.mark.gui

SMALL = {"samples_per_condition": 2, "initial_conditions": 2, "iterations": 3, "explore_size": 2, "beam_size": 1,
         "test_conditions": 6, "evaluator_batch": 8}


def _model_diff_page(qtbot, make_window):
    from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays
    from fixtures_tiny.model_diff_llms import DiffLLM
    from nemo_desktop.core.models.protocols import ModelInfo

    X, y = load_digits_arrays()
    a = DigitsMLPClassifier.train(X, y, hidden=16, seed=0)
    b = DigitsMLPClassifier.train(X[::2], y[::2], hidden=8, seed=1)
    b.info = ModelInfo("test-double:digits-mlp-b", "test-double", b.info.revision)
    window = make_window(model_process="in-process")
    window.show()
    qtbot.waitExposed(window)
    session = window.session
    session.put("classifier", "digits-a", a)
    session.put("classifier_b", "digits-b", b)
    session.put("mllm", "diff-llm", DiffLLM())
    # Reached from the workbench, as a user would.
    workbench = window.show_pane("workbench")
    workbench.compare_button.click()
    pane = window.panes["analyses"]
    assert window.current_pane() is pane
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "model-diff", timeout=120000)
    assert pane.analysis_list.currentItem().text().startswith("model-diff")
    # The second classifier the session holds is what the run uses, and its picker says so.
    assert pane._model_boxes["classifier_b"].currentText() == "current (digits-b)"
    return window, pane


def test_compare_models_runs_live_and_exports_the_csv(qtbot, make_window, tmp_path):
    _window, pane = _model_diff_page(qtbot, make_window)
    assert not pane.model_diff_live.isVisibleTo(pane) and not pane.export_csv_button.isVisibleTo(pane)
    generator = pane._model_boxes["generator"]
    generator.setCurrentIndex(generator.findData("digits"))
    for name, value in SMALL.items():
        pane.form.set_value(name, value)

    seen = []  # (table rows, curve points, result shown yet) at each partial result, in the GUI thread
    handle = pane.run()
    assert pane.model_diff_live.isVisibleTo(pane) and pane.model_diff_live.rows() == 0
    # Connected after the panel's own slot (made in run()), so each snapshot sees the panel already updated.
    handle.sig_partial.connect(lambda _item: seen.append((pane.model_diff_live.rows(),
                                                          len(pane.model_diff_live.curve.points),
                                                          pane.result is not None)))
    with qtbot.waitSignal(pane.sig_result_shown, timeout=180000):
        pass
    result = pane.result
    iterations = SMALL["iterations"]
    # t = 0 (the initial summaries) and one row per iteration, each shown while the run was still going.
    assert seen == [(t + 1, t + 1, False) for t in range(iterations + 1)]
    assert [r.t for r in result.iterations] == list(range(iterations + 1))
    table = pane.model_diff_live.table
    assert table.rowCount() == iterations + 1
    for row, record in enumerate(result.iterations):
        assert table.item(row, 0).text() == str(record.t)
        assert table.item(row, 2).text() == str(record.n_conditions)
        assert table.item(row, 3).text() == f"{record.best_objective:+.3f}"
        assert table.item(row, 4).text() == ", ".join(record.beam)
    assert pane.model_diff_live.curve.points == [(r.t, r.best_objective) for r in result.iterations]
    assert "Completeness + Density" in table.horizontalHeaderItem(3).toolTip()
    pane.model_diff_live.curve.grab()  # paints without error

    # The result page: explanations with their scores, the heatmap, the disagreement gallery's captions.
    text = pane.result_view.toPlainText()
    assert "Pearson correlation over 6 held-out conditions" in text or "Completeness is undefined on 6" in text
    assert "Accuracy of A minus B per digit and color" in text
    assert "model A classifies" in text
    # Token attribution (on by default): each explanation's words shaded by the score they carry.
    assert text.count("Token attribution: each") == sum(e.error is None and bool(e.text.strip())
                                                        for e in result.explanations) > 0
    assert "background-color:#" in pane.result_view.toHtml()

    # CSV export, off the GUI thread: the same two files as `nemo compare run --csv`.
    assert pane.export_csv_button.isVisibleTo(pane) and pane.export_csv_button.isEnabled()
    out = tmp_path / "diff.csv"
    export = pane.export_csv(str(out))
    qtbot.waitUntil(lambda: export.state in ("done", "failed"), timeout=30000)
    assert export.state == "done"
    assert export.outcome.result == [out, tmp_path / "diff.scores.csv"]
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert list(rows[0])[:4] == ["set", "digit", "color", "angle"]
    held_out = [r for r in rows if r["set"] == "held-out"]
    assert len(held_out) == len(result.test) == 6
    for r, m in zip(held_out, result.test):
        assert r["digit"] == str(m.condition.get("digit")) and int(r["n"]) == m.n
        assert float(r["difference_a_minus_b"]) == pytest.approx(m.accuracy_a - m.accuracy_b, abs=1e-4)
    assert sum(r["set"] == "observed" for r in rows) == len(result.observed)
    scores = list(csv.DictReader((tmp_path / "diff.scores.csv").open(encoding="utf-8")))
    assert [s["method"] for s in scores] == [e.method for e in result.explanations]
    for s, e in zip(scores, result.explanations):
        assert int(s["n_held_out"]) == e.score.n == 6
        assert float(s["completeness"]) == pytest.approx(e.score.completeness, abs=1e-4)
        assert int(s["tokens"]) == e.score.tokens and s["explanation"] == e.text


def test_compare_models_button_opens_the_model_diff_page(qtbot, make_window):
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    workbench = window.show_pane("workbench")
    assert workbench.compare_button.text() == "Compare models…"
    workbench.compare_button.click()
    pane = window.panes["analyses"]
    assert window.current_pane() is pane
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "model-diff", timeout=120000)
    assert {"classifier", "classifier_b", "generator"} <= set(pane._model_boxes)
    assert not pane.model_diff_live.isVisibleTo(pane)  # nothing has run yet


def test_the_gui_csv_is_the_clis_for_the_same_run(qtbot, make_window, tmp_path):
    """Two tiny timm checkpoints and a loopback OpenAI-compatible LLM, typed into the page as a user would; then
    `nemo compare run --csv` with the same models and settings answers from the results store (no LLM call) and
    writes byte-identical files."""
    pytest.importorskip("timm")
    from fixtures_tiny.classifiers import build_tiny_timm
    from fixtures_tiny.model_diff_llms import DiffLLM, serve_openai_compatible
    from nemo_desktop.cli.main import main

    digits = [str(d) for d in range(10)]
    a = f"timm:local-dir:{build_tiny_timm(tmp_path / 'a', label_names=digits, input_size=32, seed=0)}"
    b = f"timm:local-dir:{build_tiny_timm(tmp_path / 'b', label_names=digits, input_size=32, seed=1)}"
    llm = DiffLLM()
    server = serve_openai_compatible(llm)
    url = f"openai-compatible:http://127.0.0.1:{server.server_port}/v1"
    try:
        window = make_window()
        window.show()
        qtbot.waitExposed(window)
        window.show_pane("workbench").compare_button.click()
        pane = window.panes["analyses"]
        qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "model-diff", timeout=120000)
        for role, ref in (("classifier", a), ("classifier_b", b), ("mllm", url)):
            pane._model_boxes[role].setEditText(ref)
        generator = pane._model_boxes["generator"]
        generator.setCurrentIndex(generator.findData("digits"))
        small = {**SMALL, "iterations": 1, "beam_size": 2, "test_conditions": 8}
        for name, value in small.items():
            pane.form.set_value(name, value)
        with qtbot.waitSignal(pane.sig_result_shown, timeout=180000):
            pane.run()
        export = pane.export_csv(str(tmp_path / "gui.csv"))
        qtbot.waitUntil(lambda: export.state in ("done", "failed"), timeout=30000)
        assert export.state == "done"
        calls = len(llm.calls)
        assert calls > 0  # the GUI's run asked the LLM behind the loopback server
        options = [x for k, v in small.items() for x in (f"--{k.replace('_', '-')}", str(v))]
        assert main(["compare", "run", "--model-a", a, "--model-b", b, "--llm", url, *options, "--device", "cpu",
                     "--csv", str(tmp_path / "cli.csv")]) == 0
    finally:
        server.shutdown()
    assert len(llm.calls) == calls  # the CLI found the GUI's run in the store: the same result
    assert (tmp_path / "cli.csv").read_bytes() == (tmp_path / "gui.csv").read_bytes()
    assert (tmp_path / "cli.scores.csv").read_bytes() == (tmp_path / "gui.scores.csv").read_bytes()
