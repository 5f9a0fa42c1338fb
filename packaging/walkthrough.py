"""A new user's walkthrough in the real window under a virtual X server, with geometry checks (issues 28, 43).

    .venv/bin/python packaging/walkthrough.py [--out docs/screenshots/walkthrough] [--size 1280x800] [--readme]

From a fresh, temporary NEMO_HOME, offline, on a screen of --size: the first window must fit the screen (its
available geometry); the first launch must open on the welcome page; "Try the demo" is pressed there (a real
digits dataset and a real small classifier, trained here); the welcome page no longer says nothing is here; each
Analyses page is opened: a dataset page starts on the demo's dataset, model-diff and fix take what the demo offers
them (a second classifier; a fix folder), and every analysis the demo's models allow is run and exported as HTML
(the others show why Run is disabled); the Report exporter lists them. At every stop the window's geometry is
checked (no table column narrower than its header's longest word, no result view that scrolls sideways, no
visible widget outside the window, no input field under 120 px, no tab title cut off, the workbench's Run visible
without scrolling, the Jobs dock) and a screenshot is saved. Each page's settings must survive a page switch, be
on disk before the window closes, and survive a restart of the window. Exit status 1 when a check failed (all are
printed). With --readme it also saves the README's two shots of this path (the welcome page and an Analyses result
with its chart); `screenshots.py` makes the README's others, which need its tiny captioning model and editor.
Without a DISPLAY the script re-runs itself under `xvfb-run` with a screen of --size (see screenshots.py for the
packages). It takes about ten minutes on a 2-core CPU (the demo, a second classifier, the runs).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import ROOT, rerun_under_xvfb, run_until, save, settle  # noqa: E402

MIN_FIELD = 120
PROBLEMS: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        PROBLEMS.append(what)


def clipped_tab_titles(window) -> list[str]:
    """Visible tabs whose title is not shown whole: elided, cut off by the tab bar's edge or its scroll arrows, or
    scrolled out of sight (the dataset browser's "CEI of a run" was cut at 1280 px)."""
    from PySide6.QtWidgets import QStyle, QTabBar, QToolButton

    bad = []
    for bar in window.findChildren(QTabBar):
        if not bar.isVisible() or bar.count() == 0:
            continue
        arrows = [b for b in bar.findChildren(QToolButton) if b.isVisible()]
        right = min([b.x() for b in arrows] + [bar.width()])
        pad = bar.style().pixelMetric(QStyle.PixelMetric.PM_TabBarTabHSpace, None, bar)
        fm = bar.fontMetrics()
        for i in range(bar.count()):
            if not bar.isTabVisible(i):
                continue
            text = bar.tabText(i).replace("&&", "\0").replace("&", "").replace("\0", "&")
            rect, need = bar.tabRect(i), fm.horizontalAdvance(text) + pad // 2
            if rect.left() < 0 or rect.right() >= right or rect.width() < need:
                owner = bar.parent().objectName() or type(bar.parent()).__name__
                bad.append(f"tab '{text}' of {owner}: {rect.width()} px at x {rect.left()}..{rect.right()}, "
                           f"shown up to x {right - 1}, its title needs {need} px")
    return bad


def _scrolled(widget, window) -> bool:
    """Whether `widget` lies inside a scroll area's viewport (where being out of sight is scrolling, not a bug)."""
    from PySide6.QtWidgets import QAbstractScrollArea

    w = widget.parentWidget()
    while w is not None and w is not window:
        parent = w.parentWidget()
        if isinstance(parent, QAbstractScrollArea) and w is parent.viewport():
            return True
        w = parent
    return False


def outside_window(window) -> list[str]:
    """Visible widgets (outside scroll areas) that reach past the window's edges."""
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtWidgets import QWidget

    inside = window.rect().adjusted(-1, -1, 1, 1)
    bad = []
    for w in window.findChildren(QWidget):
        if not w.isVisible() or w.isWindow() or w.width() <= 0 or _scrolled(w, window):
            continue
        r = QRect(w.mapTo(window, QPoint(0, 0)), w.size())
        if not inside.contains(r):
            bad.append(f"{w.objectName() or type(w).__name__} at x {r.left()}..{r.right()}, y {r.top()}..{r.bottom()}"
                       f" is outside the {window.width()}x{window.height()} window")
    return bad


def sideways_results(window) -> list[str]:
    """Result views (report HTML) that scroll sideways although their widest table would fit: in the view as it
    is, or with the Analyses settings column at its narrowest. A table too wide for either (competency-cf's
    counterfactuals, two enlarged images a row) scrolls, and is named as a note."""
    from PySide6.QtWidgets import QTextBrowser

    analyses = window.panes["analyses"]
    settings = analyses.splitter.widget(1)
    out = []
    for view in window.centralWidget().findChildren(QTextBrowser):
        bar = view.horizontalScrollBar()
        if not view.isVisible() or view.document().characterCount() <= 1 or bar.maximum() <= 0:
            continue
        spare = max(0, settings.width() - settings.minimumWidth()) if analyses.isAncestorOf(view) else 0
        what = f"{view.objectName() or 'a result view'} scrolls sideways by {bar.maximum()} px"
        if bar.maximum() <= spare:
            out.append(what)
        else:
            print(f"  --    {what}: its widest table needs more than this window has")
    return out


def geometry(window, where: str) -> None:
    """No visible table column narrower than its header's longest word; no result view scrolling sideways; no
    visible widget outside the window; no visible input under 120 px; no tab title cut off."""
    from PySide6.QtWidgets import QAbstractItemView, QAbstractSpinBox, QComboBox, QHeaderView, QLineEdit

    for problem in clipped_tab_titles(window) + outside_window(window) + sideways_results(window):
        check(False, f"{where}: {problem}")

    root = window.centralWidget()
    for header in root.findChildren(QHeaderView):
        if header.orientation().name != "Horizontal" or not header.isVisible() or header.isHidden():
            continue
        view = header.parent()
        if not isinstance(view, QAbstractItemView) or not view.isVisible() or view.model() is None:
            continue
        fm = header.fontMetrics()
        for col in range(header.count()):
            if header.isSectionHidden(col):
                continue
            text = str(view.model().headerData(col, header.orientation()) or "")
            longest = max((fm.horizontalAdvance(w) for w in text.split()), default=0)
            width = header.sectionSize(col)
            if longest and width < longest + 4:
                check(False, f"{where}: column '{text}' of {view.objectName() or type(view).__name__} is {width} px,"
                             f" its longest word needs {longest + 4}")
    fields = [w for t in (QLineEdit, QAbstractSpinBox, QComboBox) for w in root.findChildren(t)]
    analyses = window.panes["analyses"]
    for f in fields:
        if not f.isVisible() or isinstance(f.parent(), (QComboBox, QAbstractSpinBox)):
            continue
        # The Analyses settings and pickers: at least 120 px. Elsewhere (a 0.00-1.00 spin box): its content fits.
        if analyses.isAncestorOf(f) and f.width() < MIN_FIELD:
            check(False, f"{where}: field {f.objectName() or type(f).__name__} is {f.width()} px wide")
        elif not analyses.isAncestorOf(f) and f.width() < min(f.minimumSizeHint().width(), MIN_FIELD):
            check(False, f"{where}: field {f.objectName() or type(f).__name__} is {f.width()} px, narrower than "
                         f"its content ({f.minimumSizeHint().width()} px)")
    check(True, f"{where}: geometry checked ({len(fields)} fields)")


def show_page(app, pane, name: str) -> None:
    pane.select_analysis(name)
    run_until(app, lambda: pane.page is not None and pane.page.spec.name == name, 60)
    settle(app, 0.5)


def run_page(app, pane, window, name: str, out: Path, exported: list) -> None:
    """Run the page shown, wait for its result and export it as HTML into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    done = []
    pane.sig_result_shown.connect(done.append)
    handle = pane.run()
    run_until(app, lambda: not handle.active, 900)
    if handle.state == "done":
        run_until(app, lambda: bool(done), 60)
        path = out / f"{name}.html"
        job = pane.export(str(path))
        run_until(app, lambda: not job.active, 120)
        check(path.is_file(), f"{name}: ran and exported ({path.name})")
        exported.append(name)
    else:
        error = (handle.outcome.error or {}) if handle.outcome else {}
        check(False, f"{name}: the run {handle.state}: {error.get('message')}")
        window.jobs_panel.clear_finished()
        for box in app.topLevelWidgets():  # the error dialog: recorded above, closed for the next shot
            if box.isVisible() and box is not window:
                box.close()
    pane.sig_result_shown.disconnect()


def kept_on_disk(window) -> dict:
    """The Analyses pages' remembered inputs as the settings file holds them now (page_memory.py)."""
    import json

    from nemo_desktop.gui.panes.analyses.page_memory import STATE_KEY, from_settings
    from nemo_desktop.gui.settings import STATE_FILE_NAME

    path = window.paths.config_dir / STATE_FILE_NAME
    return from_settings(json.loads(path.read_text(encoding="utf-8")).get(STATE_KEY)) if path.exists() else {}


def mark_setting(pane) -> tuple[str | None, object]:
    """Give the page's seed (else its first whole-number setting) a value of its own, to be found again after a
    page switch and a restart: (field, value), or (None, None) when the page has no such setting."""
    editors = pane.form.editors
    field = "seed" if "seed" in editors else next((n for n, (kind, _w) in editors.items() if kind == "int"), None)
    if field is None:
        return None, None
    widget = editors[field][1]
    value = min(widget.maximum(), widget.value() + 7)
    pane.form.set_value(field, value)
    return field, pane.form.values()[field]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots" / "walkthrough")
    parser.add_argument("--size", default="1280x800")
    parser.add_argument("--readme", type=Path, nargs="?", const=ROOT / "docs" / "screenshots", default=None,
                        help="also save the README's shots of a new user's path (first_run.png: the welcome page; "
                             "analyses.png: the competency of the demo digits with its chart) in this folder "
                             "(default docs/screenshots); screenshots.py makes the others")
    args = parser.parse_args()
    if not os.environ.get("DISPLAY") and os.environ.get("QT_QPA_PLATFORM") != "offscreen" \
            and not os.environ.get("NEMO_SCREENSHOTS_CHILD"):
        return rerun_under_xvfb(args.size.lower())
    size = tuple(int(x) for x in args.size.lower().split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="nemo-walkthrough-"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HOME"] = str(work / "hf")  # nothing downloaded: a new user's computer

    from nemo_desktop.gui.app import build

    app, window = build(["--home", str(work / "home")])
    window.show()
    settle(app, 1.5)

    print("1. first launch")
    available = app.primaryScreen().availableGeometry()
    frame = window.frameGeometry()
    check(available.contains(frame), f"the first window ({frame.width()}x{frame.height()} with its frame) fits the "
                                     f"screen's {available.width()}x{available.height()}")
    window.resize(*size)  # as maximised (a virtual X server has no window manager to maximise it)
    settle(app, 0.5)
    check(window.showing_welcome(), "a first launch opens on the welcome page")
    welcome = window.first_run.welcome
    check(welcome.demo_button.isVisible() and welcome.demo_button.isDefault(), "'Try the demo' is the main action")
    save(window, args.out / "01_welcome.png")
    if args.readme:
        save(window, args.readme / "first_run.png")

    print("2. the demo")
    ready = []
    window.first_run.sig_demo_ready.connect(ready.append)
    welcome.demo_button.click()
    run_until(app, lambda: bool(ready), 900)
    browser = window.panes["dataset_browser"]
    run_until(app, lambda: browser.data is not None and browser.data.indexed, 600)
    run_until(app, lambda: window.first_run.next_step.isVisible(), 60)
    text = window.first_run.next_step.text.text()
    check("Next step" in text and "multimodal LLM" in text and "image editor" in text,
          "after the demo the next step and the MLLM and editor are named")
    check("Nothing is on this computer yet" not in welcome.intro.text(), "the welcome page knows the demo is here")
    settle(app, 2.0)
    geometry(window, "dataset browser")
    save(window, args.out / "02_demo_next_step.png")
    analytics = browser.analytics
    analytics.setCurrentWidget(analytics._confusion_page)
    settle(app, 1.0)
    matrix = analytics.confusion
    check(matrix.horizontalScrollBar().maximum() == 0, "the confusion matrix shows its ten columns")
    geometry(window, "dataset browser (confusion)")
    save(window, args.out / "02b_confusion.png")
    analytics.setCurrentIndex(0)
    manager = window.show_pane("model_manager")
    from nemo_desktop.core.demo import CLASSIFIER_ID

    run_until(app, lambda: manager.model.row_of(CLASSIFIER_ID) >= 0, 60)
    check("1 on this computer" in manager.status_label.text() or "on this computer" in manager.status_label.text(),
          f"Model manager after the demo: {manager.status_label.text()[:60]}")
    settle(app, 1.0)
    geometry(window, "model manager")
    save(window, args.out / "03_model_manager.png")

    print("3. the workbench")
    workbench = window.show_pane("workbench")
    run_until(app, lambda: bool(workbench.methods), 60)
    settle(app, 1.0)
    run_bottom = workbench.run_button.mapTo(window, workbench.run_button.rect().bottomLeft()).y()
    dock_top = window.jobs_dock.mapTo(window, window.jobs_dock.rect().topLeft()).y() \
        if window.jobs_dock.isVisible() else window.height()
    check(workbench.run_button.isVisible() and run_bottom < dock_top, "the workbench's Run is visible")
    geometry(window, "workbench")
    save(window, args.out / "04_workbench.png")

    print("4. the analyses")
    pane = window.show_pane("analyses")
    run_until(app, lambda: pane.analysis_list.count() > 0, 60)
    from nemo_desktop.gui.panes.analyses.plugin import NAME_ROLE

    names = [pane.analysis_list.item(i).data(NAME_ROLE) for i in range(pane.analysis_list.count())]
    order = ["competency-estimator", "competency-score"]
    exported, marks = [], {}
    dataset = str(ready[0].dataset_dir)
    for name in order + [n for n in names if n not in order]:
        show_page(app, pane, name)
        spec = pane.page.spec
        if spec.inputs.data == "dataset" and not spec.data_label:
            check(pane.data_path.text() == dataset, f"{name}: starts on the open dataset (the demo's)")
        elif name == "competency-cf":  # one of the demo's digits
            pane.data_path.setText(str(sorted(Path(dataset).glob("*/*.png"))[0]))
        if pane.demo_offers.isVisible():  # model-diff: a second classifier; fix: a fix folder
            made = []
            pane.demo_offers.sig_made.connect(lambda _n, extra: made.append(extra))
            pane.demo_offers.button.click()
            run_until(app, lambda: bool(made) or pane.demo_offers.job is None and pane.demo_offers.button.isEnabled()
                      and "Working" not in pane.demo_offers.note.text(), 900)
            check(bool(made), f"{name}: the demo made what it offers ({made[0].summary if made else 'nothing'})")
            settle(app, 0.5)
        if name == "competency-estimator":
            pane.form.set_value("epochs", 3)
        if "max_iter" in pane.form.editors:  # counterfactual search: a few steps are enough to be seen
            pane.form.set_value("max_iter", 20)
        settle(app, 0.3)
        problem = pane.run_problem()
        if problem is None:
            run_page(app, pane, window, name, work / "exports", exported)  # the HTML reports: not kept
        else:
            print(f"  --    {name}: not runnable from the demo: {problem}")
            check(pane.run_problem_label.isVisible() and not pane.run_button.isEnabled(),
                  f"{name}: Run disabled with the reason shown")
        settle(app, 1.0)
        settings = pane.run_button.parentWidget().parentWidget().parentWidget()  # the settings column's scroll area
        bar = settings.horizontalScrollBar() if hasattr(settings, "horizontalScrollBar") else None
        check(bar is None or not bar.isVisible(), f"analyses/{name}: the settings column fits (no sideways scrolling)")
        run_right = pane.run_button.mapTo(window, pane.run_button.rect().topRight()).x()
        check(pane.run_button.isVisible() and run_right < window.width(), f"analyses/{name}: Run is visible")
        geometry(window, f"analyses/{name}")
        save(window, args.out / f"05_analyses_{name}.png")
        if args.readme and name == "competency-score" and pane.result is not None:
            save(window, args.readme / "analyses.png")
        marks[name] = mark_setting(pane)  # after the run: the runs use the defaults

    print("   settings after a page switch")
    for name in [n for n, (field, _v) in marks.items() if field is None]:
        print(f"  --    {name}: no whole-number setting to follow")
    marks = {n: mark for n, mark in marks.items() if mark[0] is not None}
    for name, (field, value) in marks.items():
        show_page(app, pane, name)
        check(pane.form.values().get(field) == value,
              f"{name}: '{field}' is still {value} after a page switch (shows {pane.form.values().get(field)})")
    print("5. the report exporter")
    exporter = window.show_pane("report_exporter")
    run_until(app, lambda: len(exporter.items) >= len(exported), 60)
    settle(app, 1.0)
    check("No stored results" not in exporter.status_label.text() or not exporter.items,
          f"Report exporter: {exporter.status_label.text()}")
    check(sum(it.kind == "analysis" for it in exporter.items) >= len(exported), "analysis results are listed")
    geometry(window, "report exporter")
    save(window, args.out / "06_report_exporter.png")

    print("6. a restart")
    window.background_settings.flush()  # the writes already made (page switches), not the close's
    kept = kept_on_disk(window)
    check(all(kept.get(n, {}).get("values", {}).get(field) == value for n, (field, value) in marks.items()),
          "the pages' settings are on disk before the window closes (a crash would not lose them)")
    window.close()
    window.jobs.shutdown(10_000)
    from nemo_desktop.gui.main_window import MainWindow

    again = MainWindow(window.paths, welcome=None)
    again.show()
    settle(app, 1.5)
    check(not again.showing_welcome(), "a restart opens where the window was left, not on the welcome page")
    pane = again.show_pane("analyses")
    run_until(app, lambda: pane.analysis_list.count() > 0, 60)
    for name, (field, value) in marks.items():
        show_page(app, pane, name)
        check(pane.form.values().get(field) == value,
              f"{name}: '{field}' is still {value} after a restart (shows {pane.form.values().get(field)})")
    again.close()
    again.jobs.shutdown(10_000)
    print(f"{len(PROBLEMS)} problem(s)" + ("".join(f"\n  - {p}" for p in PROBLEMS) if PROBLEMS else ""))
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
