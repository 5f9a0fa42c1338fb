"""Report exporter pane: pick stored diagnoses and runs, choose HTML or PDF, export with the core engine.

The list comes from the results store (explanations and runs) on the I/O lane; each export goes through
`core.reports.export_report` (one file per picked item, written atomically) on the I/O lane too.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (QAbstractItemView, QButtonGroup, QComboBox, QFileDialog, QHBoxLayout, QLabel,
                               QPushButton, QRadioButton, QTableWidgetItem, QVBoxLayout)

from nemo_desktop.core.base.job_context import JobContext

from ...jobs import IO, JobHandle
from ...widgets.list_table import list_table
from ..base import Pane, PaneHost

ITEM_ROLE = Qt.ItemDataRole.UserRole + 1
REFRESH_DELAY_MS = 300  # after a job ends: jobs ending together read the list once


@dataclass(frozen=True)
class ReportItem:
    kind: str  # "result" (a diagnosis) | "analysis" (an analysis result with its own report) | "run"
    ident: str  # result key or run id
    title: str
    detail: str
    created_at: float | None

    def file_name(self, fmt: str) -> str:
        stem = Path(self.title).stem if self.kind == "result" else self.title
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in stem)[:40].strip("-") or self.kind
        return f"nemo-{safe}-{self.ident[:8]}.{fmt}"


RUN_TITLES = {"batch": "batch diagnosis"}
WHAT = {"run": "Run: ", "result": "Diagnosis: ", "analysis": "Analysis: "}


def _analysis_items(store) -> list[ReportItem]:
    """Stored results of the analyses that have their own report section (competency estimator, failure modes,
    model differences, global explanations, ...), newest first."""
    from nemo_desktop.core.reports import sections

    sections._ensure()
    items = []
    for kind, analysis in sorted({k for k in sections._REPORTS if k[1] is not None}):
        for r in store.find(analysis=analysis, limit=500):
            p = r.payload
            if p.get("kind") != kind:
                continue
            manifest = p.get("manifest") or {}
            classifier = (manifest.get("classifier") or {}).get("id") if isinstance(manifest.get("classifier"),
                                                                                    dict) else None
            models = manifest.get("models") or {}
            named = [m.get("id") for m in models.values() if isinstance(m, dict) and m.get("id")] \
                if isinstance(models, dict) else []
            detail = f"{kind} analysis" + (f", classifier {classifier}" if classifier else
                                          f", models {', '.join(named[:3])}" if named else "")
            items.append(ReportItem("analysis", r.key, analysis, detail, r.created_at))
    return items


def list_report_items(store, ctx: JobContext) -> list[ReportItem]:
    ctx.progress("Reading the results store", 0, None)
    items = []
    for r in store.list_runs():
        run_items = store.run_items(r["run_id"])
        counts: dict[str, int] = {}
        for it in run_items:
            counts[it.get("status") or "?"] = counts.get(it.get("status") or "?", 0) + 1
        what = ", ".join(f"{n} {s}" for s, n in counts.items())
        items.append(ReportItem("run", r["run_id"], RUN_TITLES.get(r.get("kind"), r.get("kind") or "run"),
                                f"{len(run_items)} items" + (f" ({what})" if what else "")
                                + f", {r.get('status') or '—'}", r.get("created_at")))
    items += _analysis_items(store)
    for r in store.find(kind="explanation"):
        p, s = r.payload, r.payload.get("sample", {})
        cei = p.get("cei")
        items.append(ReportItem("result", r.key, Path(s.get("image_path") or "image").name,
                                f"{p.get('method', '?')}: {s.get('true_name', '?')} → {s.get('pred_name', '?')}"
                                + ("" if cei is None else f", CEI {cei:+.1f}"), r.created_at))
    items.sort(key=lambda it: -(it.created_at or 0))  # newest first, whatever their kind
    return items


def describe_items(items: list[ReportItem]) -> str:
    """The line above the table: what is listed, or that nothing is stored yet."""
    if not items:
        return ("No stored results yet: explain a sample in the workbench, run an analysis, or run a batch "
                "first.")
    n = {k: sum(it.kind == k for it in items) for k in ("result", "analysis", "run")}
    parts = [f"{n['result']} diagnos{'is' if n['result'] == 1 else 'es'}",
             f"{n['analysis']} analysis result{'s' if n['analysis'] != 1 else ''}",
             f"{n['run']} run{'s' if n['run'] != 1 else ''} (batches and benchmarks)"]
    return "Stored: " + ", ".join(parts) + "."


def export_items(store, items: list[ReportItem], fmt: str, target: Path, ctx: JobContext,
                 image_format: str | None = None) -> list[Path]:
    """One report per item: into `target` when it is a folder, else `target` is the single file."""
    from nemo_desktop.core.reports import export_report

    written = []
    for i, item in enumerate(items):
        ctx.check_cancelled()
        ctx.progress("Exporting reports", i, len(items), item.title)
        out = target / item.file_name(fmt) if target.is_dir() else target
        written.append(export_report(item.ident, store, fmt, out, image_format=image_format,
                                     ctx=ctx.sub(item.title)))
    ctx.progress("Exporting reports", len(items), len(items))
    return written


class ReportExporterPane(Pane):
    NAME = "report_exporter"
    TITLE = "Report exporter"
    SUMMARY = "Turn stored explanations, analysis results and runs into an HTML or PDF report."

    sig_exported = Signal(list)  # paths written

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.items: list[ReportItem] = []
        self.last_written: list[Path] = []
        self.table = list_table(["What", "Date", "Details", "Id"], "reportItems",
                                selection=QAbstractItemView.SelectionMode.ExtendedSelection, stretch=2)
        self.table.itemSelectionChanged.connect(self._update)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        select_all = QPushButton("Select all")
        select_all.clicked.connect(self.table.selectAll)

        self.html_radio = QRadioButton("HTML")
        self.html_radio.setToolTip("One self-contained file, images included")
        self.pdf_radio = QRadioButton("PDF")
        from nemo_desktop.core.base.extras import available

        if not available("pdf"):  # said before anything runs: the choice is off, its tooltip names the extra
            self.pdf_radio.setEnabled(False)
            self.pdf_radio.setToolTip("PDF reports need the 'pdf' extra: pip install 'nemo-desktop[pdf]', then "
                                      "restart. HTML needs nothing extra.")
        self.html_radio.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.html_radio)
        group.addButton(self.pdf_radio)
        self.images_combo = QComboBox()
        self.images_combo.addItem("Images: automatic", None)
        self.images_combo.addItem("Images: PNG", "png")
        self.images_combo.addItem("Images: JPEG", "jpeg")
        self.images_combo.setToolTip("Automatic: PNG (lossless) for a diagnosis, JPEG (about 6x smaller) for a run")
        self.export_button = QPushButton("Export…")
        self.export_button.setObjectName("exportButton")
        self.export_button.clicked.connect(self.export_report)
        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Open the last exported report")
        self.open_button.clicked.connect(self._open_last)
        self.open_button.setEnabled(False)
        self.status_label = QLabel("")
        self.status_label.setObjectName("exportStatus")
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)  # error messages, paths
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        top = QHBoxLayout()
        top.addWidget(QLabel(f"<h2>{self.TITLE}</h2>"), 1)
        top.addWidget(select_all)
        top.addWidget(refresh)
        options = QHBoxLayout()
        options.addWidget(self.html_radio)
        options.addWidget(self.pdf_radio)
        options.addWidget(self.images_combo)
        options.addStretch(1)
        options.addWidget(self.open_button)
        options.addWidget(self.export_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(QLabel("Pick diagnoses, analysis results and runs (Ctrl/Shift-click for several; each "
                                "becomes one report):"))
        layout.addWidget(self.table, 1)
        layout.addLayout(options)
        from .table_export import TableExportRow

        self.table_row = TableExportRow(self)  # the per-image table of an indexed dataset (core/export)
        layout.addWidget(self.table_row)
        layout.addWidget(self.status_label)
        self._job: JobHandle | None = None
        self._listing: JobHandle | None = None
        # New results join the list by themselves: a finished job marks the list stale; it is read again at
        # once when the pane is shown (a moment later, so several jobs ending together read it once), else when
        # the pane is next shown.
        self._stale = False
        self._refresh_soon = QTimer(self)
        self._refresh_soon.setSingleShot(True)
        self._refresh_soon.setInterval(REFRESH_DELAY_MS)
        self._refresh_soon.timeout.connect(self._refresh_if_stale)
        host.jobs.sig_job_finished.connect(self._job_finished)
        self._update()

    def on_first_shown(self) -> None:
        self.refresh()

    def _job_finished(self, handle) -> None:
        if handle.state != "done" or handle is self._job or handle is self._listing or not handle.visible:
            return
        self._stale = True
        if self.isVisible():
            self._refresh_soon.start()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._stale:
            self._refresh_soon.start()

    def _refresh_if_stale(self) -> None:
        if self._stale and self._shown_once:
            self.refresh()

    def refresh(self) -> JobHandle:
        self.table_row.refresh()
        session = self.host.session
        self._stale = False
        handle = self.host.jobs.submit(lambda ctx: list_report_items(session.store(), ctx),
                                       title="Listing stored results", lane=IO, ask_before_quit=False, visible=False)
        handle.sig_done.connect(self._show_items)
        self._listing = handle
        return handle

    def _show_items(self, items: list[ReportItem]) -> None:
        keep = {it.ident for it in self.selected_items()}  # a refresh keeps what was selected
        self.items = items
        self.table.setRowCount(len(items))
        for i, it in enumerate(items):
            what = WHAT.get(it.kind, "") + it.title
            when = datetime.fromtimestamp(it.created_at).strftime("%Y-%m-%d %H:%M") if it.created_at else "—"
            for col, text in enumerate((what, when, it.detail, it.ident[:16])):
                cell = QTableWidgetItem(text)
                cell.setData(ITEM_ROLE, i)
                self.table.setItem(i, col, cell)
        self.status_label.setText(describe_items(items))  # never "no results" beside a list of them
        if keep:
            self.select_keys(sorted(keep))
        self._update()

    def selected_items(self) -> list[ReportItem]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [self.items[r] for r in rows]

    def select_keys(self, idents: list[str]) -> None:
        self.table.clearSelection()
        mode = self.table.selectionMode()
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.MultiSelection)
        for i, it in enumerate(self.items):
            if it.ident in idents:
                self.table.selectRow(i)
        self.table.setSelectionMode(mode)

    @property
    def fmt(self) -> str:
        return "pdf" if self.pdf_radio.isChecked() else "html"

    def _update(self) -> None:
        busy = self._job is not None and self._job.active
        self.export_button.setEnabled(bool(self.selected_items()) and not busy)

    def export_report(self) -> JobHandle | None:
        """File ▸ Export report…: asks where to write, then exports what is selected."""
        items = self.selected_items()
        if not items:
            self.host.show_pane(self.NAME)
            self.host.show_message("Export report", "Select one or more stored results or runs in the Report "
                                                    "exporter first.")
            return None
        if len(items) == 1:
            path, _ = QFileDialog.getSaveFileName(self, "Export report", items[0].file_name(self.fmt),
                                                  f"{self.fmt.upper()} (*.{self.fmt})")
            target = Path(path) if path else None
        else:
            folder = QFileDialog.getExistingDirectory(self, f"Folder for {len(items)} reports")
            target = Path(folder) if folder else None
        return self.export(items, target) if target else None

    def export(self, items: list[ReportItem], target: Path) -> JobHandle:
        fmt, session, images = self.fmt, self.host.session, self.images_combo.currentData()
        n = len(items)
        self._job = self.host.jobs.submit(
            lambda ctx: export_items(session.store(), items, fmt, Path(target), ctx, images),
            title=f"Exporting {n} {fmt.upper()} report{'s' if n != 1 else ''}", lane=IO)
        self.status_label.setText("Exporting…")
        self._job.sig_done.connect(self._exported)
        self._job.sig_failed.connect(lambda e: self.status_label.setText(f"Export failed: {e.get('message')}"))
        self._job.sig_finished.connect(lambda _o: self._update())
        self._update()
        return self._job

    def _exported(self, paths: list[Path]) -> None:
        self.last_written = list(paths)
        self.open_button.setEnabled(bool(paths))
        where = paths[0] if len(paths) == 1 else paths[0].parent
        self.status_label.setText(f"Wrote {len(paths)} report{'s' if len(paths) != 1 else ''}: {where}")
        self.host.show_status(f"Exported {len(paths)} report(s) to {where}")
        self.sig_exported.emit(paths)

    def _open_last(self) -> bool:
        """Open the last report with the system's viewer; when none opens it, say so and where the file is."""
        if not self.last_written:
            return False
        path = self.last_written[0]
        if QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
            return True
        text = (f"No program on this computer opened {path.name}. The report is at:\n{path}\n\nOpen it with a web "
                "browser (HTML) or a PDF viewer.")
        self.status_label.setText(f"No viewer opened the report; it is at {path}")
        self.host.show_message("Open report", text)
        return False

    def save_state(self, settings: QSettings) -> None:
        settings.setValue("format", self.fmt)

    def restore_state(self, settings: QSettings) -> None:
        if settings.value("format") == "pdf" and self.pdf_radio.isEnabled():
            self.pdf_radio.setChecked(True)


PANE = ReportExporterPane
