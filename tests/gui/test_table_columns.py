"""Issue 28 #3: no table in the app squeezes a column below its header's longest word; tables scroll
horizontally instead. Checked offscreen at 1200 and 1280 px: every item view of every pane, and the
competency-cf result table as the Analyses page shows it (rich text in a QTextBrowser)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics, QTextTable
from PySide6.QtWidgets import QHeaderView, QTableView, QTableWidget


def _longest_word(text: str, font) -> tuple[str, int]:
    fm = QFontMetrics(font)
    return max(((w, fm.horizontalAdvance(w)) for w in str(text).split()), key=lambda x: x[1], default=("", 0))


def _squeezed_columns(view: QTableView) -> list[str]:
    header, model = view.horizontalHeader(), view.model()
    bad = []
    for c in range(model.columnCount()):
        if header.isSectionHidden(c):
            continue
        text = model.headerData(c, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole)
        word, px = _longest_word(text or "", header.font())
        if header.sectionSize(c) < px:
            bad.append(f"{view.objectName() or type(view).__name__} column {c} '{word}': {header.sectionSize(c)} "
                       f"px < {px} px")
    return bad


@pytest.mark.parametrize("width", [1200, 1280])
def test_no_item_view_of_any_pane_squeezes_a_header_word(qtbot, make_window, width):
    window = make_window()
    window.resize(width, 800)
    window.show()
    qtbot.waitExposed(window)
    bad, seen = [], 0
    for name in list(window.panes):
        window.show_pane(name)
        qtbot.wait(50)
        for view in window.panes[name].findChildren(QTableView):
            seen += 1
            bad += _squeezed_columns(view)
    assert seen >= 6, seen  # the panes' tables were found (catalog, disk, endpoints, report runs, batch, ...)
    assert bad == []


def test_a_stretching_column_is_pinned_at_its_header_word_and_the_table_scrolls(qtbot):
    table = QTableWidget(3, 4)
    table.setHorizontalHeaderLabels(["#", "File", "Counterfactual explanation", "Status"])
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
    for c in (0, 1, 3):
        table.setColumnWidth(c, 20)  # narrower than "File" and "Status"
    qtbot.addWidget(table)
    from nemo_desktop.gui.widgets.table_columns import keep_header_words_whole

    keep_header_words_whole(table)
    table.resize(160, 200)
    table.show()
    qtbot.waitExposed(table)
    qtbot.wait(20)
    assert _squeezed_columns(table) == []
    assert table.horizontalScrollBar().maximum() > 0  # it scrolls instead
    table.resize(1200, 200)  # room again: the column stretches to fill it
    qtbot.wait(20)
    assert header.sectionResizeMode(2) == QHeaderView.ResizeMode.Stretch
    assert sum(header.sectionSize(c) for c in range(4)) >= table.viewport().width() - 2
    assert _squeezed_columns(table) == []


def _competency_cf_html() -> str:
    from nemo_desktop.core.reports.document import ReportDocument, Section
    from nemo_desktop.core.reports.html import render_html
    from nemo_desktop.core.reports.sections.competency import _counterfactual_blocks

    outcomes = [SimpleNamespace(method=m, artifact=None, diff_artifact=None, competency_before=0.412,
                                competency_after=0.931, success=True, error=None, iterations=37, lpips=0.1234,
                                feature_similarity=0.981, latent_similarity=0.944, seconds=12.31)
                for m in ("latent", "pixel", "reco")]
    blocks = _counterfactual_blocks(SimpleNamespace(counterfactuals=outcomes, manifest={}), {}, 0.9)
    return render_html(ReportDocument("single", "Competency counterfactuals", "", "now",
                                      [Section("Counterfactuals", blocks=blocks)]))


def _tables(frame):
    for child in frame.childFrames():
        if isinstance(child, QTextTable):
            yield child
        yield from _tables(child)


@pytest.mark.parametrize("width", [1200, 1280])
def test_the_competency_cf_table_keeps_its_words_whole_on_the_analyses_page(qtbot, make_window, width):
    # In-process: a layout test; a model worker starting beside it only delays the page's first result past the
    # 100 ms below.
    window = make_window(model_process="in-process")
    window.resize(width, 800)
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("analyses")
    # The pane's first show lists the analyses and puts the shown page's own (empty) result on screen (issue 28
    # §2): wait for it, or it clears the HTML set below (seen under load).
    qtbot.waitUntil(lambda: pane.page is not None, timeout=60000)
    qtbot.wait(100)
    view = pane.result_view
    view.setHtml(_competency_cf_html())
    qtbot.wait(50)
    doc, layout = view.document(), view.document().documentLayout()
    checked, bad = 0, []
    for table in _tables(doc.rootFrame()):
        for row in range(table.rows()):
            for col in range(table.columns()):
                block = table.cellAt(row, col).firstCursorPosition().block()
                if not block.text().strip():
                    continue
                font = block.begin().fragment().charFormat().font()
                word, px = _longest_word(block.text(), font)
                width_px = layout.blockBoundingRect(block).width()
                checked += 1
                if width_px < px:
                    bad.append(f"row {row} col {col} '{word}': {width_px:.0f} px < {px} px")
    assert checked >= 10 * 2 and bad == []
    assert view.horizontalScrollBar().maximum() > 0  # the table is wider than the view: it scrolls
