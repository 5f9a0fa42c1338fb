"""Model manager pane: the catalog with each model's state, and everything done to models.

Left: the catalog (status: not downloaded / downloading n% / downloaded / loaded, size, GPU memory, license,
gated) with Download, Cancel, Delete, Load, Unload, Set as default and Import. Right: the memory profile and a
local model server (SpeedPanel), device and precision, the Hugging Face token, OpenAI-compatible endpoints, and
the disk usage of the weights cache.
Downloads and file work run on the I/O lane, loading and unloading on the GPU lane.
"""
from __future__ import annotations

import html

from PySide6.QtCore import QSettings, QSortFilterProxyModel, Qt, QTimer
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QMessageBox, QScrollArea,
                               QSplitter, QTableView, QVBoxLayout, QWidget)

from nemo_desktop.core.models.user_catalog import remove_user_entry
from nemo_desktop.core.app.worker.protocol import JobSpec

from ...jobs import GPU, IO, JobHandle
from ....core.app.session import ENDPOINT_PREFIX, KIND_TEXT
from ...widgets.buttons import action_button
from ...widgets.table_columns import keep_header_words_whole
from ..base import Pane, PaneHost
from .catalog_rows import CatalogSnapshot, delete_entry_weights, download_entry, load_catalog, refresh_row
from .custom_import import add_checkpoint
from .widgets.catalog_table import CatalogTableModel, fit_columns
from .widgets.disk_panel import DiskPanel
from .widgets.import_dialog import ImportCheckpointDialog
from .widgets.settings_panel import SettingsPanel
from .widgets.speed_panel import SpeedPanel

MODEL_JOBS = "nemo_desktop.core.app.jobs.models"  # the model jobs, run where the settings say (core/app/worker)

# The columns' widths as the user left them; another key than earlier versions', whose widths scrolled sideways.
HEADER_KEY = "catalog_columns"


class ModelManagerPane(Pane):
    NAME = "model_manager"
    TITLE = "Model manager"
    SUMMARY = "The classifiers, captioning models and image editors NEMO Desktop can use, and their state."

    def __init__(self, host: PaneHost, parent=None):
        super().__init__(host, parent)
        self.model = CatalogTableModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(CatalogTableModel.SORT_ROLE)
        self.downloads: dict[str, JobHandle] = {}

        self.table = QTableView()
        self.table.setObjectName("catalogTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # keep the catalog's order until asked
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)  # one line per model; the tooltip has the full text
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        keep_header_words_whole(self.table)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self.table.doubleClicked.connect(lambda _i: self.load_selected())

        button = action_button  # shorter lines below
        self.download_button = button("Download", self.download_selected,
                                      "Download the weights into the Hugging Face cache", "downloadButton")
        self.cancel_button = button("Cancel download", self.cancel_selected, "Stop the download (finished files "
                                    "are kept; a new download resumes)", "cancelDownloadButton")
        self.delete_button = button("Delete", self.delete_selected, "Delete the downloaded weights (or remove an "
                                    "imported model from your catalog)", "deleteButton")
        self.load_button = button("Load", self.load_selected, "Load into memory as the current model of its kind",
                                  "loadButton")
        self.unload_button = button("Unload", self.unload_selected, "Release its memory", "unloadButton")
        self.default_button = button("Set as default", self.set_default_selected,
                                     "Use this model when none of its kind is loaded (saved in the settings)",
                                     "defaultButton")
        self.import_button = button("Import classifier…", self.import_checkpoint,
                                    "Add your own fine-tuned timm classifier (weights + class names)", "importButton")
        self.fit_competency_button = button(
            "Fit competency…", self.fit_competency,
            "Fit a competency estimator (PaRCE) for the loaded classifier on its training data: the Analyses "
            "pane's competency-estimator page, with the current classifier", "fitCompetencyButton")
        self.refresh_button = button("Refresh", self.refresh, "Read the catalog and check the weights cache again",
                                     "refreshButton")

        self.status_label = QLabel("")
        self.status_label.setObjectName("catalogStatus")
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)  # error messages
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.load_reason = QLabel("")  # why Load is disabled (weights not on disk)
        self.load_reason.setObjectName("loadReason")
        self.load_reason.setWordWrap(True)
        self.load_reason.setEnabled(False)
        self.load_reason.hide()
        self.loaded_label = QLabel("")
        self.loaded_label.setObjectName("loadedModels")
        self.loaded_label.setWordWrap(True)

        files_row, memory_row = QHBoxLayout(), QHBoxLayout()
        for b in (self.download_button, self.cancel_button, self.delete_button):
            files_row.addWidget(b)
        files_row.addStretch(1)
        files_row.addWidget(self.import_button)
        for b in (self.load_button, self.unload_button, self.default_button):
            memory_row.addWidget(b)
        memory_row.addStretch(1)
        memory_row.addWidget(self.fit_competency_button)

        heading = QLabel(f"<h2>{self.TITLE}</h2>")
        top = QHBoxLayout()
        top.addWidget(heading, 1)
        top.addWidget(self.refresh_button)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addLayout(top)
        lv.addWidget(self.table, 1)
        lv.addLayout(files_row)
        lv.addLayout(memory_row)
        # The hint's room is kept when it is empty: Load / Unload do not move when it appears.
        reason_box = QWidget()
        reason_box.setObjectName("loadReasonBox")
        rbl = QVBoxLayout(reason_box)
        rbl.setContentsMargins(0, 0, 0, 0)
        rbl.addWidget(self.load_reason)
        reason_box.setFixedHeight(2 * self.load_reason.fontMetrics().lineSpacing() + 4)
        lv.addWidget(reason_box)
        lv.addWidget(self.loaded_label)
        lv.addWidget(self.status_label)

        self.settings_panel = SettingsPanel(host)
        self.settings_panel.sig_use_endpoint.connect(self.use_endpoint)
        self.speed_panel = SpeedPanel(host)
        self.speed_panel.sig_use_endpoint.connect(self.use_endpoint)
        self.disk_panel = DiskPanel(host)
        right_inner = QWidget()
        rv = QVBoxLayout(right_inner)
        rv.setContentsMargins(4, 4, 4, 4)
        rv.addWidget(self.speed_panel)
        rv.addWidget(self.settings_panel)
        rv.addWidget(self.disk_panel)
        rv.addStretch(1)
        right = QScrollArea()
        right.setObjectName("modelManagerSettings")
        right.setWidgetResizable(True)
        right.setWidget(right_inner)
        # Narrower than its content (a small window, a dragged splitter): scroll sideways rather than clip.
        right.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        right.setMinimumWidth(220)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("modelManagerSplitter")
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setSizes([760, 440])
        layout = QVBoxLayout(self)
        layout.addWidget(self.splitter)
        self._job: JobHandle | None = None
        self._header_state = None
        host.sig_models_changed.connect(self._on_models_changed)
        self._on_models_changed()
        self._update_buttons()

    # -- layout ---------------------------------------------------------------------------------------------
    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        QTimer.singleShot(0, self, self.fit_right_column)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        QTimer.singleShot(0, self, self.fit_right_column)  # after the splitter has been resized

    def fit_right_column(self) -> None:
        """Widen the settings column to its content when the catalog side can spare the room (at the default
        1200 x 800 window its fixed share cut 36 px of it)."""
        right = self.splitter.widget(1)
        need = (right.widget().minimumSizeHint().width() + right.verticalScrollBar().sizeHint().width()
                + 2 * right.frameWidth())
        sizes = self.splitter.sizes()
        total = sum(sizes)
        left_min = self.splitter.widget(0).minimumSizeHint().width()
        if len(sizes) == 2 and total and sizes[1] < need:
            self.splitter.setSizes([max(left_min, total - need), min(need, total - left_min)])

    # -- loading the catalog ----------------------------------------------------------------------------
    def on_first_shown(self) -> None:
        self.refresh()
        self.settings_panel.reload()
        self.speed_panel.reload()
        self.disk_panel.refresh()

    def refresh(self) -> JobHandle:
        if self._job is not None and self._job.active:
            return self._job
        self.refresh_button.setEnabled(False)
        self.status_label.setText("Reading the model catalog…")
        self._job = self.host.jobs.submit(load_catalog, title="Reading the model catalog", lane=IO,
                                         ask_before_quit=False)
        self._job.sig_done.connect(self._on_loaded)
        self._job.sig_failed.connect(self._on_failed)  # the main window shows the error dialog too
        self._job.sig_finished.connect(lambda _o: self.refresh_button.setEnabled(True))
        return self._job

    def _on_loaded(self, snapshot: CatalogSnapshot) -> None:
        selected = self.selected_entry()
        self.model.set_rows(snapshot.rows)
        if self._header_state is not None:
            self.table.horizontalHeader().restoreState(self._header_state)
            self._header_state = None
        elif not getattr(self, "_sized", False):
            self._sized = True
            fit_columns(self.table)  # every column readable without sideways scrolling where they fit
        if selected is not None:
            self.select(selected.id)
        downloaded = sum(r.status in ("downloaded", "local") for r in snapshot.rows)
        self.status_label.setText(f"{len(snapshot.rows)} models in the catalog, {downloaded} on this computer "
                                  f"(★ the paper's default). Weights cache: {snapshot.cache_dir}")
        self._update_buttons()

    def _on_failed(self, error: dict) -> None:
        self.status_label.setText(f"The catalog could not be read: {error.get('message')}")

    # -- selection ----------------------------------------------------------------------------------------
    def selected_entry(self):
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return None
        return self.model.rows[self.proxy.mapToSource(rows[0]).row()].entry

    def select(self, entry_id: str) -> bool:
        row = self.model.row_of(entry_id)
        if row < 0:
            return False
        self.table.selectRow(self.proxy.mapFromSource(self.model.index(row, 0)).row())
        return True

    def _selected_row(self):
        e = self.selected_entry()
        return None if e is None else self.model.rows[self.model.row_of(e.id)]

    def _update_buttons(self) -> None:
        row = self._selected_row()
        e = row.entry if row else None
        local = row is not None and row.status in ("local", "missing")
        downloading = e is not None and e.id in self.downloads
        loaded = e is not None and e.id in self.model.loaded
        self.download_button.setEnabled(e is not None and not local and not downloading
                                        and row.status != "downloaded")
        self.cancel_button.setEnabled(downloading)
        self.delete_button.setEnabled(e is not None and not downloading and not loaded and (
            row.status in ("downloaded", "partial") or (local and e.origin != "shipped")))
        why_not = load_blocker(row.status, row.entry) if row is not None else None
        loading = e is not None and e.id in self.model.loading
        self.load_button.setEnabled(e is not None and not loaded and not downloading and not loading
                                    and why_not is None)
        self.load_button.setToolTip(why_not or "Load into memory as the current model of its kind")
        self.load_reason.setText(why_not or "")
        self.load_reason.setVisible(bool(why_not))
        self.unload_button.setEnabled(loaded)
        self.default_button.setEnabled(e is not None)
        self.fit_competency_button.setEnabled("classifier" in self.host.session.loaded())

    def fit_competency(self) -> None:
        """The competency-estimator page of the Analyses pane (its classifier picker says "current")."""
        self.host.show_pane("analyses").open_with("competency-estimator")

    # -- downloads ----------------------------------------------------------------------------------------
    def download_selected(self):
        e = self.selected_entry()
        return self.download(e.id) if e is not None else None

    def download(self, entry_id: str) -> JobHandle:
        if entry_id in self.downloads:
            return self.downloads[entry_id]
        entry = self.model.rows[self.model.row_of(entry_id)].entry
        token_ref = self.settings_panel.settings.hub.token_ref if self.settings_panel.settings else "env:HF_TOKEN"
        handle = self.host.jobs.submit(lambda ctx: download_entry(entry, token_ref, ctx), title=f"Downloading {entry.id}",
                                       lane=IO)
        self.downloads[entry_id] = handle
        self.model.set_downloading(entry_id, None)
        handle.sig_progress.connect(lambda p: self.model.set_downloading(entry_id, p.fraction))
        handle.sig_finished.connect(lambda _o: self._download_finished(entry_id, entry))
        self._update_buttons()
        return handle

    def cancel_selected(self) -> None:
        e = self.selected_entry()
        if e is not None and e.id in self.downloads:
            self.downloads[e.id].cancel()

    def _download_finished(self, entry_id: str, entry) -> None:
        self.downloads.pop(entry_id, None)
        self.model.set_downloading(entry_id, None, active=False)
        self._refresh_row(entry)
        self.disk_panel.refresh()

    def _refresh_row(self, entry) -> JobHandle:
        handle = self.host.jobs.submit(lambda ctx: refresh_row(entry, ctx), title=f"Checking {entry.id}", lane=IO,
                                       ask_before_quit=False, visible=False)
        handle.sig_done.connect(self.model.replace_row)
        handle.sig_done.connect(lambda _r: self._update_buttons())
        return handle

    # -- delete ---------------------------------------------------------------------------------------------
    def confirm(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(self, title, text, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                      QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def delete_selected(self):
        row = self._selected_row()
        if row is None:
            return None
        e = row.entry
        if row.status in ("local", "missing"):
            if not self.confirm("Remove from your catalog", f"Remove {e.id} from your model catalog?\n\nThe files "
                                f"stay where they are:\n{e.repo}"):
                return None
            handle = self.host.jobs.submit(lambda ctx: remove_user_entry(e.id), title=f"Removing {e.id}", lane=IO)
            handle.sig_done.connect(lambda _r: self.refresh())
            return handle
        if not self.confirm("Delete weights", f"Delete the downloaded weights of {e.id} ({e.repo})?\n\nThey are "
                            "removed from the Hugging Face cache, which other tools may share."):
            return None
        handle = self.host.jobs.submit(lambda ctx: delete_entry_weights(e, ctx), title=f"Deleting {e.id}", lane=IO)
        handle.sig_done.connect(lambda freed: self.host.show_status(f"Deleted {e.id}: {_size(freed)} freed."))
        handle.sig_finished.connect(lambda _o: (self._refresh_row(e), self.disk_panel.refresh()))
        return handle

    # -- load / unload ------------------------------------------------------------------------------------
    def load_selected(self):
        e = self.selected_entry()
        if e is None:
            return None
        if not self.load_button.isEnabled():  # a double-click on a row whose weights are not on disk
            self.host.show_status(self.load_reason.text() or f"{e.id} cannot be loaded now.")
            return None
        return self.load(e.kind, e.id)

    def load(self, kind: str, ref: str) -> JobHandle:
        handle = self.host.jobs.submit(JobSpec(f"{MODEL_JOBS}:load_model", (kind, ref)),
                                       title=f"Loading the {KIND_TEXT.get(kind, kind)} {ref}", lane=GPU)
        # The row says so while the load waits behind another GPU job and while it runs.
        self.model.set_loading(ref, "queued" if self._gpu_busy(handle) else "loading…")
        handle.sig_started.connect(lambda: self.model.set_loading(ref, "loading…"))
        handle.sig_finished.connect(lambda _o: self.model.set_loading(ref, None))
        handle.sig_finished.connect(lambda _o: self.host.sig_models_changed.emit())
        self._update_buttons()
        return handle

    def use_endpoint(self, name: str) -> JobHandle:
        """Load the endpoint `name` as the captioning model; one in memory under that name is unloaded first (it
        may now name another URL or model)."""
        ref = ENDPOINT_PREFIX + name
        if self.host.session.loaded().get("mllm") == ref:
            self.unload("mllm")
        self.settings_panel.reload()  # the endpoints table and the defaults as saved
        return self.load("mllm", ref)

    def _gpu_busy(self, handle: JobHandle) -> bool:
        return any(h.lane == GPU and h is not handle for h in self.host.jobs.active_jobs())

    def unload_selected(self):
        e = self.selected_entry()
        if e is None:
            return None
        kind = self.model.loaded.get(e.id, e.kind)
        return self.unload(kind)

    def unload(self, kind: str) -> JobHandle:
        handle = self.host.jobs.submit(JobSpec(f"{MODEL_JOBS}:unload_model", (kind,)), title=f"Unloading the {KIND_TEXT[kind]}",
                                       lane=GPU, ask_before_quit=False)
        handle.sig_finished.connect(lambda _o: self.host.sig_models_changed.emit())
        return handle

    def _on_models_changed(self) -> None:
        loaded = self.host.session.loaded()
        self.model.set_loaded(loaded)
        # A model loaded that the listing does not know on disk (the demo's classifier, trained and registered
        # just now; an import): the catalog is read again, so the rows and "n on this computer" are current.
        if self.model.rows and any(self._stale(ref) for ref in loaded.values()):
            self.refresh()
        parts = [f"{KIND_TEXT[k]}: <b>{html.escape(loaded[k])}</b>" for k in ("classifier", "mllm", "editor") if k in loaded]
        self.loaded_label.setText("In memory — " + "; ".join(parts) if parts else
                                  "No model in memory; a diagnosis loads the defaults it needs.")
        self._update_buttons()

    def _stale(self, ref: str) -> bool:
        i = self.model.row_of(ref)
        if i < 0:
            return ":" not in ref and "/" not in ref  # a catalog id not listed yet (a path or spec is not listed)
        return self.model.rows[i].status not in ("downloaded", "local")

    def set_default_selected(self):
        e = self.selected_entry()
        if e is None:
            return None
        kind, ident = e.kind, e.id

        def change(s):
            setattr(s.models, kind, ident)

        handle = self.host.jobs.submit(lambda ctx: self.host.session.update_settings(change),
                                       title=f"Making {ident} the default {KIND_TEXT[kind]}", lane=IO,
                                       ask_before_quit=False, visible=False)
        handle.sig_done.connect(self.settings_panel._show)
        handle.sig_done.connect(lambda _s: self.status_label.setText(
            f"{ident} is now the default {KIND_TEXT[kind]}."))
        return handle

    # -- import ---------------------------------------------------------------------------------------------
    def make_import_dialog(self) -> ImportCheckpointDialog:
        return ImportCheckpointDialog(self)

    def import_checkpoint(self) -> ImportCheckpointDialog:
        dialog = self.make_import_dialog()
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(lambda: self.run_import(dialog.request(), dialog.load_after))
        dialog.open()
        return dialog

    def run_import(self, request, load_after: bool) -> JobHandle:
        handle = self.host.jobs.submit(lambda ctx: add_checkpoint(request), title=f"Importing {request.model_id}",
                                       lane=IO)

        def done(entry) -> None:
            self.refresh().sig_done.connect(lambda _s: self.select(entry.id))
            if load_after:
                self.load("classifier", entry.id)

        handle.sig_done.connect(done)
        return handle

    # -- layout persistence ---------------------------------------------------------------------------------
    def save_state(self, settings: QSettings) -> None:
        if self.model.rowCount():
            settings.setValue(HEADER_KEY, self.table.horizontalHeader().saveState())
        settings.setValue("splitter", self.splitter.saveState())

    def restore_state(self, settings: QSettings) -> None:
        self._header_state = settings.value(HEADER_KEY)
        state = settings.value("splitter")
        if state is not None:
            self.splitter.restoreState(state)


def load_blocker(status: str, entry) -> str | None:
    """Why a catalog entry cannot be loaded now (its weights are not on disk), or None. Loading never
    downloads behind the user's back: a missing model fails at once with this reason instead of retrying."""
    if status == "not downloaded":
        return f"Load needs the weights on disk: Download {entry.id} first."
    if status == "partial":
        return f"The download of {entry.id} is incomplete: Download it again to finish it."
    if status == "missing":
        return f"The weights of {entry.id} are no longer at {entry.repo}: import it again or fix the path."
    return None


def _size(n: int) -> str:
    from nemo_desktop.core.models.catalog import format_size

    return format_size(n)


PANE = ModelManagerPane
