"""Issue 28 §4: three outcomes kept apart everywhere (batch table, batch summary, batch reports, JSON): explained;
tested but no cause found (also when SciTX's selection returns none although candidates were tested: every edit
destroyed the picture, the result's notes say so); nothing could be tested, with the reason."""
from __future__ import annotations

import json

from nemo_desktop.core.base.batch_items import EXPLAINED, NO_CAUSE, NOT_TESTED, BatchItem, describe_counts
from nemo_desktop.core.base.records import Candidate, ExplanationResult, SampleInfo

DESTROYED_NOTE = ("Every tested hypothesis's edit destroyed the picture or changed nothing (best CEI +31.0, #1: "
                  "structure not kept); no hypothesis is validated.")


def _result(i: int, candidates, explanation=None, selected=None, notes=()) -> ExplanationResult:
    sample = SampleInfo(f"/data/three/img{i}.png", f"{i:064x}", 3, "three", 8, "eight", 0.1, 0.8)
    cei = candidates[selected].cei if selected is not None else None
    return ExplanationResult("scitx", sample, explanation=explanation, selected_index=selected, cei=cei,
                             candidates=list(candidates), notes=list(notes))


def _items() -> list[BatchItem]:
    explained = _result(0, [Candidate("blue ink", cei=40.0)], "blue ink", 0)
    negative = _result(1, [Candidate("thin strokes", cei=-3.0)], "thin strokes", 0)
    destroyed = _result(2, [Candidate("blue ink", cei=31.0, edit_verdict="destroyed", edit_flagged=True),
                            Candidate("slant", cei=-2.0, edit_verdict="destroyed", edit_flagged=True)],
                        notes=[DESTROYED_NOTE])
    unreadable = _result(3, [Candidate("", error="The reply could not be read as a hypothesis."),
                             Candidate("", error="The reply could not be read as a hypothesis.")])
    items = []
    for r in (explained, negative, destroyed, unreadable):
        item = BatchItem(r.sample.image_path)
        item.finish(r)
        items.append(item)
    return items


def test_outcomes_are_told_apart_in_the_rows_summary_report_and_json(tmp_path):
    from nemo_desktop.core.reports import render_html
    from nemo_desktop.core.reports.batch import batch_json, build_batch_report
    from nemo_desktop.core.store import ResultsStore

    items = _items()
    assert [it.status for it in items] == [EXPLAINED, NO_CAUSE, NO_CAUSE, NOT_TESTED]
    assert items[2].summary_text() == DESTROYED_NOTE  # tested, none selected: the notes are the reason
    assert "could not be read" in items[3].summary_text() and "All 2 candidates failed" in items[3].summary_text()
    assert "no cause found" not in items[3].summary_text().lower()
    summary = describe_counts(items)
    assert summary == ("4 images: 1 explained; 2 tested, no cause found; 1 with nothing that could be tested")

    data = batch_json(items)
    assert [r["status"] for r in data["rows"]] == [EXPLAINED, NO_CAUSE, NO_CAUSE, NOT_TESTED]
    assert [r["tested"] for r in data["rows"]] == [True, True, True, False]
    assert data["rows"][3]["reason"].startswith("All 2 candidates failed") and data["rows"][2]["reason"] == DESTROYED_NOTE
    assert data["rows"][0]["explanation"] == "blue ink" and data["rows"][1]["explanation"] is None
    json.dumps(data)

    store = ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite")
    html = render_html(build_batch_report(items, store))
    assert "nothing could be tested" in html and "Why nothing could be tested" in html
    assert "All 2 candidates failed" in html


def test_nemo_explain_json_and_text_say_the_outcome():
    from nemo_desktop.cli.commands.explain import format_result, result_json

    destroyed = _result(2, [Candidate("blue ink", cei=31.0, edit_verdict="destroyed", edit_flagged=True)],
                        notes=[DESTROYED_NOTE])
    assert result_json(destroyed)["outcome"] == {"status": NO_CAUSE, "reason": DESTROYED_NOTE}
    assert "Tested, no cause found: " + DESTROYED_NOTE in format_result(destroyed)
    unreadable = _result(3, [Candidate("", error="unreadable reply")])
    assert result_json(unreadable)["outcome"]["status"] == NOT_TESTED
    assert "Nothing could be tested: All 1 candidates failed" in format_result(unreadable)


def test_the_batch_table_shows_three_outcomes_and_exports_json(qtbot, make_window, tmp_path):
    from PySide6.QtCore import Qt

    from nemo_desktop.gui.panes.workbench.widgets.batch_table import COL_EXPLANATION, COL_STATUS, TONE_COLOURS

    window = make_window()
    panel = window.show_pane("workbench").batch_panel
    items = _items()
    panel.set_items(items)
    model = panel.model
    statuses = [model.data(model.index(r, COL_STATUS)) for r in range(4)]
    assert statuses == [EXPLAINED, NO_CAUSE, NO_CAUSE, NOT_TESTED]
    colours = [model.data(model.index(r, COL_STATUS), Qt.ItemDataRole.ForegroundRole).name() for r in range(4)]
    assert colours[1] == colours[2] == TONE_COLOURS["neutral"] and colours[3] == TONE_COLOURS["untested"]
    assert "could not be read" in model.data(model.index(3, COL_EXPLANATION))
    assert panel.summary.text() == "Batch: " + describe_counts(items)
    target = tmp_path / "batch.json"
    handle = panel.export(target)
    qtbot.waitUntil(lambda: handle.state in ("done", "failed"), timeout=20000)
    assert handle.state == "done"
    rows = json.loads(target.read_text())["rows"]
    assert [r["status"] for r in rows] == [EXPLAINED, NO_CAUSE, NO_CAUSE, NOT_TESTED]
