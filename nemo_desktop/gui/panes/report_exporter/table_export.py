"""The Report exporter's "Per-image table…": one row per image of an indexed dataset for its classifier, with every
stored fact (core/export/table.py), written to Parquet, CSV or JSON Lines in a background job. Parquet is offered only
when its extra (pyarrow) is installed; the tooltip says so otherwise."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QComboBox, QFileDialog, QHBoxLayout, QLabel, QPushButton, QWidget

from nemo_desktop.core.base.job_context import JobContext

from ...jobs import IO, JobHandle


def list_indexes(store, ctx: JobContext) -> list[dict]:
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    ctx.progress("Listing reference indexes", 0, None)
    return ReferenceIndex.list(store)


def write_table(store, index_id: str, target: Path, ctx: JobContext) -> dict:
    from nemo_desktop.core.export.table import PerImageTable

    return PerImageTable.open(store, index_id).write(target, ctx=ctx)


class TableExportRow(QWidget):
    """[indexed dataset ▾] [Per-image table…], under the report list."""

    def __init__(self, pane, parent=None):
        super().__init__(parent)
        from nemo_desktop.core.base.extras import available

        self.pane = pane
        self.parquet = available("parquet")
        self.index_combo = QComboBox()
        self.index_combo.setObjectName("tableIndexCombo")
        self.index_combo.setToolTip("The indexed dataset and classifier whose per-image table is written")
        self.button = QPushButton("Per-image table…")
        self.button.setObjectName("perImageTableButton")
        self.button.setToolTip("One row per image with every stored fact (prediction, top-k, competency, failure "
                               "modes, explanation and CEI, fix gains and losses) as Parquet, CSV or JSON Lines"
                               + ("" if self.parquet else ". Parquet needs the 'parquet' extra: pip install "
                                  "'nemo-desktop[parquet]'; CSV and JSON Lines need nothing extra."))
        self.button.clicked.connect(self.ask_and_write)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Per-image table of:"))
        row.addWidget(self.index_combo, 1)
        row.addWidget(self.button)
        self.job: JobHandle | None = None
        self.show_indexes([])

    def refresh(self) -> JobHandle:
        session = self.pane.host.session
        handle = self.pane.host.jobs.submit(lambda ctx: list_indexes(session.store(), ctx), title="Listing indexes",
                                            lane=IO, ask_before_quit=False, visible=False)
        handle.sig_done.connect(self.show_indexes)
        return handle

    def show_indexes(self, rows: list[dict]) -> None:
        self.index_combo.clear()
        for r in rows:
            self.index_combo.addItem(f"{Path(r['dataset_root'] or '?').name} with {r['classifier_id']} "
                                     f"({r['entries']:,} images)", r["index_id"])
        if not rows:
            self.index_combo.addItem("no indexed dataset yet", None)
        self.button.setEnabled(bool(rows) and not (self.job is not None and self.job.active))

    def ask_and_write(self) -> JobHandle | None:
        index_id = self.index_combo.currentData()
        if not index_id:
            return None
        filters = (["Parquet (*.parquet)"] if self.parquet else []) + ["CSV (*.csv)", "JSON Lines (*.jsonl)"]
        suffix = ".parquet" if self.parquet else ".csv"
        path, _ = QFileDialog.getSaveFileName(self, "Per-image table", f"nemo-table-{index_id[:8]}{suffix}",
                                              ";;".join(filters))
        return self.write(index_id, Path(path)) if path else None

    def write(self, index_id: str, target: Path) -> JobHandle:
        session, status = self.pane.host.session, self.pane.status_label
        self.job = self.pane.host.jobs.submit(lambda ctx: write_table(session.store(), index_id, target, ctx),
                                              title="Writing the per-image table", lane=IO)
        status.setText("Writing the per-image table…")
        self.button.setEnabled(False)

        def done(out: dict) -> None:
            notes = "".join(f" Note: {n}" for n in out["notes"])
            status.setText(f"Wrote {out['rows']:,} rows x {out['columns']} columns: {out['path']}.{notes}")
            self.pane.last_written = [Path(out["path"])]
            self.pane.open_button.setEnabled(True)

        self.job.sig_done.connect(done)
        self.job.sig_failed.connect(lambda e: status.setText(f"The table could not be written: {e.get('message')}"))
        self.job.sig_finished.connect(lambda _o: self.button.setEnabled(self.index_combo.currentData() is not None))
        return self.job
