"""Issue 43 §3: at 1280×800 the first window fits the screen with its title bar, and the Jobs dock shows four
jobs whole."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from PySide6.QtCore import QRect

ROOT = Path(__file__).resolve().parents[2]


def test_the_first_window_fits_an_800_px_screen_with_its_title_bar():
    from nemo_desktop.gui.window_size import BORDER_RESERVE as B, PREFERRED, TITLE_BAR_RESERVE, initial_geometry

    for available in (QRect(0, 0, 1280, 800), QRect(0, 27, 1280, 773), QRect(1920, 0, 1366, 768)):
        g = initial_geometry(available)
        frame = g.adjusted(-B, -TITLE_BAR_RESERVE, B, B)  # the client area plus a title bar and borders
        assert available.contains(frame), (available, g)
        assert g.width() <= PREFERRED.width() and g.height() <= PREFERRED.height()
    big = initial_geometry(QRect(0, 0, 2560, 1440))
    assert (big.width(), big.height()) == (PREFERRED.width(), PREFERRED.height())


def test_the_main_window_opens_inside_a_1280x800_screen(tmp_path):
    """The real window on an offscreen screen of 1280×800 (Qt's offscreen platform takes the screen's size from
    a JSON file): its frame and every visible widget lie inside the screen's available geometry."""
    config = tmp_path / "screen.json"
    config.write_text('{"screens": [{"name": "s", "x": 0, "y": 0, "width": 1280, "height": 800, '
                      '"logicalDpi": 96, "dpr": 1}]}')
    script = (
        "import sys\n"
        "from PySide6.QtWidgets import QApplication, QWidget\n"
        "app = QApplication(sys.argv)\n"
        "from nemo_desktop.gui.main_window import MainWindow\n"
        "from nemo_desktop.gui.window_size import TITLE_BAR_RESERVE\n"
        "w = MainWindow(welcome=False)\n"
        "w.show(); app.processEvents()\n"
        "avail = app.primaryScreen().availableGeometry()\n"
        "g = w.geometry()\n"
        "assert avail.size().toTuple() == (1280, 800), avail\n"
        "assert g.top() - TITLE_BAR_RESERVE >= avail.top() and g.bottom() + 4 <= avail.bottom(), (g, avail)\n"
        "assert g.left() >= avail.left() and g.right() <= avail.right(), (g, avail)\n"
        "sb = w.statusBar()\n"
        "assert sb.isVisible() and sb.mapTo(w, sb.rect().bottomLeft()).y() < w.height()\n"
        "w.jobs.shutdown(5000)\n"
        "print('fits', g.width(), g.height())\n")
    env = {**__import__("os").environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fits 1200 760" in done.stdout, done.stdout


def test_the_jobs_dock_shows_four_jobs_whole(qtbot, make_window):
    from nemo_desktop.gui.jobs import IO

    window = make_window()
    window.resize(1280, 760)
    window.show()
    qtbot.waitExposed(window)
    panel = window.jobs_panel
    gate = threading.Event()
    handles = [window.jobs.submit(lambda ctx: gate.wait(20), title=f"Job {i}", lane=IO) for i in range(5)]
    try:
        qtbot.waitUntil(lambda: all(h.job_id in panel.rows for h in handles), timeout=20000)
        qtbot.wait(200)
        viewport = panel.scroll.viewport()
        shown = []
        for h in handles:
            row = panel.rows[h.job_id]
            top = row.mapTo(viewport, row.rect().topLeft()).y()
            bottom = row.mapTo(viewport, row.rect().bottomLeft()).y()
            shown.append(top >= 0 and bottom < viewport.height())
        assert sum(shown) >= 4, (shown, viewport.height(), [panel.rows[h.job_id].height() for h in handles])
    finally:
        gate.set()
    qtbot.waitUntil(lambda: not panel.rows, timeout=20000)


def _shown_window(qtbot, make_window):
    window = make_window()
    window.resize(1280, 760)  # the first window on a 1280×800 screen (window_size.py)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_the_confusion_matrix_shows_ten_columns_at_1280(qtbot, make_window):
    """The demo's ten classes: columns seven to nine were off the side panel's edge."""
    import numpy as np

    from nemo_desktop.core.app.dataset_browser.browse_data import BrowseData

    names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    labels = np.repeat(np.arange(10), 3)
    preds = labels.copy()
    preds[::7] = (preds[::7] + 1) % 10
    conf = np.full(len(labels), 0.9, np.float32)
    data = BrowseData("/d", names, [f"/d/{names[y]}/{i}.png" for i, y in enumerate(labels)], labels, preds, conf,
                      conf, index_id="i")
    window = _shown_window(qtbot, make_window)
    browser = window.show_pane("dataset_browser")
    browser.show_data("/d", data)
    window.first_run.refresh()
    qtbot.wait(50)
    before = browser.splitter.sizes()
    browser.analytics.setCurrentWidget(browser.analytics._confusion_page)
    qtbot.wait(100)
    view = browser.analytics.confusion
    header = view.horizontalHeader()
    assert view.isVisible() and view.model().columnCount() == 10
    assert view.horizontalScrollBar().maximum() == 0, (browser.splitter.sizes(), view.width(), header.length())
    for col in range(10):
        right = header.sectionViewportPosition(col) + header.sectionSize(col)
        assert right <= view.viewport().width(), (col, right, view.viewport().width())
    browser.analytics.setCurrentIndex(0)  # another tab: the grid gets its room back
    qtbot.wait(50)
    assert browser.splitter.sizes() == before
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=120000)


def test_the_competency_bench_table_fits_beside_the_settings_at_1280(qtbot, make_window):
    from nemo_desktop.core.analyses.competency.results import CompetencyBenchResult, GeneratorMetrics
    from nemo_desktop.core.app.jobs.analyses import result_html
    from nemo_desktop.core.base.job_context import null_context
    from nemo_desktop.gui.widgets.report_html import set_report_html

    window = _shown_window(qtbot, make_window)
    pane = window.show_pane("analyses")
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    pane.select_analysis("competency-bench")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "competency-bench", timeout=60000)
    rows = [GeneratorMetrics("orig", 34, 0, 0.0, None, 1.0, 1.0, 46.323, 0.0123, 0.0)]
    rows.append(GeneratorMetrics("igd", 34, 0, 0.0, None, None, None, None, None, 0.0, available=False))
    rows += [GeneratorMetrics(m, 34, 34, 1.0, 0.2345, 0.987, 1.0, 100.161, 0.0456, 1.234)
             for m in ("fgd", "reco", "lgd", "lnn")]
    result = CompetencyBenchResult(rows=rows, feature_space="FD_clf", n_reference=326,
                                   manifest={"n_used": 34, "n_low_competency": 34, "n_images": 360})
    set_report_html(pane.result_view, result_html(result, None, null_context()))
    qtbot.wait(100)
    # every column, KD and s / image included, without sideways scrolling
    assert pane.result_view.horizontalScrollBar().maximum() == 0, (pane.splitter.sizes(),
                                                                   pane.result_view.document().idealWidth())
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=120000)


def test_every_model_list_column_is_readable_without_sideways_scrolling_at_1280(qtbot, make_window):
    """License, Gated and the recommended GPU were off the list's edge (the demo's long license text among the
    rows); each column is at least as wide as its header's text, and the list does not scroll sideways."""
    from nemo_desktop.core.demo import digits
    from nemo_desktop.core.models.user_catalog import put_user_entry
    from nemo_desktop.core.store.paths import get_paths

    folder = digits.classifier_dir(get_paths())  # the demo's catalog entry and its long license text
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    put_user_entry(digits.catalog_entry(folder))
    window = _shown_window(qtbot, make_window)
    pane = window.show_pane("model_manager")
    qtbot.waitUntil(lambda: pane.model.row_of(digits.CLASSIFIER_ID) >= 0, timeout=60000)
    qtbot.wait(200)
    header, table = pane.table.horizontalHeader(), pane.table
    texts = [pane.model.headerData(c, header.orientation()) for c in range(header.count())]
    widths = [header.sectionSize(c) for c in range(header.count())]
    for c, text in enumerate(texts):
        assert widths[c] >= header.fontMetrics().horizontalAdvance(text), (text, widths[c])
        right = header.sectionViewportPosition(c) + widths[c]
        assert right <= table.viewport().width(), (text, right, table.viewport().width(), pane.splitter.sizes())
    assert table.horizontalScrollBar().maximum() == 0, (widths, table.viewport().width())
    assert {"License", "Gated"} <= set(texts)
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=120000)


def test_the_recommended_gpu_is_abbreviated_and_whole_in_the_tooltip():
    from PySide6.QtCore import Qt

    from nemo_desktop.core.base.job_context import null_context
    from nemo_desktop.gui.panes.model_manager.catalog_rows import load_catalog
    from nemo_desktop.gui.panes.model_manager.widgets.catalog_table import COLUMNS, CatalogTableModel, short_gpu

    assert short_gpu("24 GB (RTX 3090/4090, A5000) or larger") == "≥ 24 GB"
    assert short_gpu("48 GB (RTX A6000, the paper's GPU); 24 GB with CPU offload") == "48 GB (24 offloaded)"
    assert short_gpu("any CUDA GPU with 2 GB or more; the CPU works") == "any, CPU ok"
    assert short_gpu("a T4 or better") == "a T4 or better"  # another shape is kept, not guessed
    model = CatalogTableModel()
    model.set_rows(load_catalog(null_context()).rows)
    col = COLUMNS.index("Rec. GPU")
    for r, row in enumerate(model.rows):
        index = model.index(r, col)
        assert len(model.data(index)) <= 26, model.data(index)
        assert row.entry.recommended_gpu in model.data(index, Qt.ItemDataRole.ToolTipRole)
    assert "Recommended GPU" in model.headerData(col, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
    kinds = {model.data(model.index(r, COLUMNS.index("Kind"))) for r in range(len(model.rows))}
    assert all(k[0].isupper() for k in kinds), kinds  # "generator" showed as the catalog's word


def test_long_values_wrap_instead_of_pushing_the_table_past_the_view(qtbot, make_window):
    """The competency estimator's revision hash and dataset fingerprint were cut at the view's edge."""
    from nemo_desktop.core.reports import render_html
    from nemo_desktop.core.reports.document import KeyValues, ReportDocument, Section
    from nemo_desktop.gui.widgets.report_html import ZWSP, set_report_html

    fingerprint = "3ba5b8fd3d94027442a5090428b5dec534c0a62872a05e" * 2
    doc = ReportDocument(kind="single", title="Competency estimator", subtitle="", generated_at="", sections=[
        Section("Competency estimator", "fit", [KeyValues([("Classifier", f"demo (revision sha256:{fingerprint})"),
                                                           ("Dataset fingerprint", fingerprint)])])])
    window = _shown_window(qtbot, make_window)
    pane = window.show_pane("analyses")
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    pane.select_analysis("competency-estimator")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "competency-estimator", timeout=60000)
    set_report_html(pane.result_view, render_html(doc))
    qtbot.wait(100)
    assert pane.result_view.horizontalScrollBar().maximum() == 0
    assert fingerprint in pane.result_view.toPlainText().replace(ZWSP, "")  # all of it, only wrapped
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=120000)


def test_the_walkthrough_finds_a_widget_outside_the_window(qtbot, make_window):
    """packaging/walkthrough.py's check, on the window as it opens at 1280×800 and on a label put past its edge."""
    from PySide6.QtWidgets import QLabel

    sys.path.insert(0, str(ROOT / "packaging"))
    from walkthrough import outside_window

    window = _shown_window(qtbot, make_window)
    for pane in window.panes:
        window.show_pane(pane)
        qtbot.wait(50)
        assert outside_window(window) == [], pane
    stray = QLabel("stray", window)
    stray.setObjectName("stray")
    stray.setGeometry(1250, 10, 80, 20)
    stray.show()
    assert [p for p in outside_window(window) if p.startswith("stray")]
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=120000)
