"""The main window: the panes as tabs, the menu, the jobs status area, drag-and-drop, saved layout."""
from __future__ import annotations

import logging
import os

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (QAction, QActionGroup, QCloseEvent, QDesktopServices, QDragEnterEvent, QDropEvent,
                           QKeySequence)
from PySide6.QtWidgets import (QApplication, QDockWidget, QFileDialog, QLabel, QMainWindow, QMessageBox,
                               QStackedWidget, QTabWidget, QWidget)

from nemo_desktop import __version__
from nemo_desktop.core.store.paths import AppPaths, get_paths
from nemo_desktop.core.app.worker.hosts import make_model_host

from .dialogs.diagnose import DiagnoseDialog
from .drops import DropScan, describe_rejected, scan_dropped
from .jobs import FAILED, IO, JobHandle, JobRunner
from .panes import Pane, pane_classes
from ..core.app.session import ModelSession
from .settings import STATE_FILE_NAME, BackgroundSettings, gui_settings
from .turns import on_next_turn
from .widgets.activation import skip_activation_repaints
from .widgets.error_dialog import show_error
from .widgets.jobs_panel import JobsPanel
from .window_size import place_first_window

log = logging.getLogger(__name__)

APP_TITLE = "NEMO Desktop"
WARM_UP_DELAY_MS = 1500  # after the first paint, idle imports prepare the first diagnosis


class _FirstPaint(QObject):
    """Calls `then()` once, after the window's first paint, and stops watching (a paintEvent override would
    make every later repaint call into Python, and so wait for the GIL while a job runs Python)."""

    def __init__(self, window: QWidget, then):
        super().__init__(window)
        self._then = then
        window.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Paint:
            obj.removeEventFilter(self)
            QTimer.singleShot(0, self, self._then)  # after the paint itself
        return False


class _ModelsRelay(QObject):
    """The model worker's supervisor reports its models from the GPU lane's thread; this queues the report to
    the GUI thread (a worker that died took its models with it: the lists must say so at once)."""

    changed = Signal(object)
    state = Signal(object)  # WorkerSupervisor.state(): restoring, dead with its cause, models not restored


class MainWindow(QMainWindow):
    # Closing with running jobs: cancel them, then wait at most this long for them to stop.
    CLOSE_WAIT_MS = 15_000

    sig_models_changed = Signal()  # a model was loaded or unloaded (panes refresh what they show)

    def __init__(self, paths: AppPaths | None = None, runner: JobRunner | None = None,
                 settings: QSettings | None = None, session: ModelSession | None = None,
                 welcome: bool | None = False):
        """`welcome`: open on the welcome page (None: when this is a first launch, as the app does)."""
        super().__init__()
        self.paths = paths or get_paths()
        self.settings = settings or gui_settings(self.paths)
        # Values set while the window is in use: written off the GUI thread.
        self.background_settings = BackgroundSettings(self.paths.config_dir / STATE_FILE_NAME, legacy=self.settings)
        self.jobs = runner or JobRunner(parent=self)
        self.session = session or ModelSession(self.paths)
        # Where model jobs (JobSpecs) run: this process, or the supervised model worker process (settings).
        self._models_relay = _ModelsRelay(self)
        self._models_relay.changed.connect(lambda _models: self.sig_models_changed.emit())
        self.model_host = make_model_host(self.session, on_models_changed=self._models_relay.changed.emit,
                                          on_state_changed=self._models_relay.state.emit)
        self.jobs.model_host = self.model_host
        self._closing = False
        self._first_paint = _FirstPaint(self, self._after_first_paint)
        self.pane_actions: list[QAction] = []
        self.setObjectName("mainWindow")
        self.setWindowTitle(APP_TITLE)
        place_first_window(self)  # fits the screen with its title bar (1280×800 included)
        self.setAcceptDrops(True)
        self._build_drop_highlight()

        self.tabs = QTabWidget()
        self.tabs.setObjectName("paneTabs")
        self.tabs.setDocumentMode(True)
        self.panes: dict[str, Pane] = {}
        for cls in pane_classes():
            pane = cls(self)
            self.panes[cls.NAME] = pane
            index = self.tabs.addTab(pane, cls.TITLE)
            self.tabs.setTabToolTip(index, cls.SUMMARY)
        self.tabs.currentChanged.connect(self._on_pane_changed)
        self.stack = QStackedWidget()  # the welcome page (first launch) in front of the panes
        self.stack.setObjectName("centralStack")
        self.stack.addWidget(self.tabs)
        self.setCentralWidget(self.stack)

        self._build_jobs_area()
        self._build_model_process_status()
        self._build_menus()
        self.jobs.sig_job_finished.connect(self._report_job_failure)
        from .first_run import FirstRun

        self.first_run = FirstRun(self)  # guides in the empty panes, the demo, recent datasets, last models
        self.stack.addWidget(self.first_run.welcome)
        if welcome is None:
            from .first_run.controller import is_first_launch

            welcome = is_first_launch(self.settings, self.background_settings)
        self.restore_layout()
        if welcome:
            self.show_welcome()
        skip_activation_repaints(self)  # every item view exists by now (opening a dialog repainted them all)

    # -- services offered to panes (PaneHost) --------------------------------------------------
    def show_error(self, error: dict | BaseException | str) -> QWidget:
        return show_error(error, self)

    def show_message(self, title: str, text: str) -> QMessageBox:
        """A non-blocking information box (never exec(): the event loop keeps running)."""
        box = QMessageBox(QMessageBox.Icon.Information, title, text, QMessageBox.StandardButton.Ok, self)
        box.setObjectName("messageBox")
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        return box

    def show_status(self, text: str, ms: int = 8000) -> None:
        self.statusBar().showMessage(text, ms)

    def show_welcome(self) -> None:
        """The welcome page: the checklist to a first diagnosis and "Try the demo" (View ▸ Welcome)."""
        self.stack.setCurrentWidget(self.first_run.welcome)

    def showing_welcome(self) -> bool:
        return self.stack.currentWidget() is self.first_run.welcome

    def show_pane(self, name: str) -> Pane:
        pane = self.panes[name]
        self.stack.setCurrentWidget(self.tabs)
        self.tabs.setCurrentWidget(pane)
        if self.isVisible():
            pane.ensure_shown_once(paint_first=True)
        return pane

    def current_pane(self) -> Pane:
        return self.tabs.currentWidget()  # type: ignore[return-value]

    # -- construction ----------------------------------------------------------------------------
    def _build_jobs_area(self) -> None:
        self.jobs_panel = JobsPanel(self.jobs)
        self.jobs_dock = QDockWidget("Jobs", self)
        self.jobs_dock.setObjectName("jobsDock")  # saveState() needs the name
        self.jobs_dock.setWidget(self.jobs_panel)
        self.jobs_dock.setAllowedAreas(Qt.DockWidgetArea.BottomDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.jobs_dock)
        self.jobs_summary = QLabel(self.jobs_panel.summary())
        self.jobs_summary.setObjectName("jobsSummary")
        self.statusBar().addPermanentWidget(self.jobs_summary)
        self.jobs_panel.sig_summary_changed.connect(self.jobs_summary.setText)
        # Idle, the dock is one line; when jobs come, it takes room for them again.
        self.jobs_panel.sig_height_wanted.connect(self._size_jobs_dock)

    def _size_jobs_dock(self, panel_height: int) -> None:
        """Give the Jobs dock room for its panel's wanted height plus the dock's own title bar and frame."""
        chrome = max(0, self.jobs_dock.height() - self.jobs_panel.height()) if self.jobs_dock.isVisible() else 0
        self.resizeDocks([self.jobs_dock], [panel_height + chrome], Qt.Orientation.Vertical)

    def _build_model_process_status(self) -> None:
        """The model worker's state in the status bar: models being loaded again after a restart, the ones it
        could not load again, and a worker that kept dying (with its cause and a button to start it again)."""
        from PySide6.QtWidgets import QPushButton

        from .model_process_status import describe_state

        self.model_process_label = QLabel()
        self.model_process_label.setObjectName("modelProcessStatus")
        self.model_process_label.setVisible(False)
        self.model_process_button = QPushButton("Start the model process again")
        self.model_process_button.setObjectName("restartModelProcess")
        self.model_process_button.setVisible(False)
        self.model_process_button.clicked.connect(self.start_model_process_again)
        self.statusBar().addPermanentWidget(self.model_process_label)
        self.statusBar().addPermanentWidget(self.model_process_button)

        def show(state: dict) -> None:
            text, tip, dead = describe_state(state)
            self.model_process_label.setText(text)
            self.model_process_label.setToolTip(tip)
            self.model_process_label.setVisible(bool(text))
            self.model_process_button.setVisible(dead)
            self.sig_models_changed.emit()  # pickers follow the worker (restored, or not)

        self._models_relay.state.connect(show)

    def start_model_process_again(self) -> None:
        """After the model process was given up (it kept dying): start it again; it restores the models."""
        revive = getattr(self.model_host, "revive", None)
        if callable(revive):
            self.model_process_button.setVisible(False)
            revive()

    def _action(self, text: str, slot, shortcut: QKeySequence | str | None = None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
        action.triggered.connect(slot)
        return action

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.action_open_dataset = self._action(
            "&Open dataset…", self.open_dataset, QKeySequence.StandardKey.Open,
            "Open a folder of images or a CSV manifest in the Dataset browser")
        self.action_diagnose = self._action(
            "&Diagnose image…", self.diagnose_from_file_dialog, "Ctrl+D",
            "Choose images and explain the classifier's mistakes on them")
        self.action_export_report = self._action(
            "&Export report…", self.export_report, "Ctrl+E",
            "Export the result on screen (or the results selected in the Report exporter) as HTML or PDF")
        self.action_quit = self._action("&Quit", self.close, QKeySequence.StandardKey.Quit)
        for a in (self.action_open_dataset, self.action_diagnose, self.action_export_report):
            file_menu.addAction(a)
        file_menu.addSeparator()
        file_menu.addAction(self.action_quit)

        view_menu = bar.addMenu("&View")
        group = QActionGroup(self)
        for i, pane in enumerate(self.panes.values()):
            action = self._action(pane.TITLE, lambda _checked=False, n=pane.NAME: self.show_pane(n),
                                  f"Ctrl+{i + 1}", pane.SUMMARY)
            action.setCheckable(True)
            group.addAction(action)
            view_menu.addAction(action)
            self.pane_actions.append(action)
        self.pane_actions[self.tabs.currentIndex()].setChecked(True)
        view_menu.addSeparator()
        self.action_welcome = self._action("&Welcome", lambda: self.show_welcome(), "Ctrl+0",
                                           "The welcome page: the steps to a first diagnosis and the demo")
        view_menu.addAction(self.action_welcome)
        jobs_action = self.jobs_dock.toggleViewAction()
        jobs_action.setShortcut(QKeySequence("Ctrl+J"))
        view_menu.addAction(jobs_action)

        help_menu = bar.addMenu("&Help")
        self.action_about = self._action("&About NEMO Desktop", self.show_about)
        self.action_open_logs = self._action("Open &log folder", self.open_log_folder,
                                             tip="Show the folder with NEMO Desktop's log files")
        help_menu.addAction(self.action_about)
        help_menu.addAction(self.action_open_logs)

    # -- menu actions ----------------------------------------------------------------------------
    def open_dataset(self) -> None:
        self.show_pane("dataset_browser").open_dataset()  # type: ignore[attr-defined]

    def export_report(self) -> None:
        """Ctrl+E: export what is on screen (a pane with a shown result exports it), else the exporter's selection."""
        pane = self.current_pane()
        export_shown = getattr(pane, "export_shown", None)
        if callable(export_shown) and getattr(pane, "export_button", None) is not None \
                and pane.export_button.isEnabled():
            export_shown()
            return
        self.show_pane("report_exporter").export_report()  # type: ignore[attr-defined]

    def diagnose_from_file_dialog(self) -> None:
        from nemo_desktop.core.base.images import IMAGE_EXTENSIONS

        patterns = " ".join(f"*{ext}" for ext in sorted(IMAGE_EXTENSIONS))
        files, _ = QFileDialog.getOpenFileNames(self, "Diagnose images", "",
                                                f"Images ({patterns});;All files (*)")
        if files:
            self.diagnose_paths(files)

    def show_about(self) -> QMessageBox:
        from PySide6 import __version__ as pyside_version

        paths = "".join(f"<tr><td>{k}</td><td><code>{v}</code></td></tr>" for k, v in self.paths.as_dict().items())
        text = (f"<h3>{APP_TITLE} {__version__}</h3>"
                "<p>Explains why a vision classifier got an image wrong, and tests the explanation with "
                "counterfactual images (SciTX).</p>"
                f"<p>Qt for Python {pyside_version}</p><table>{paths}</table>")
        box = QMessageBox(QMessageBox.Icon.NoIcon, f"About {APP_TITLE}", text, QMessageBox.StandardButton.Ok, self)
        box.setObjectName("aboutBox")
        box.setTextFormat(Qt.TextFormat.RichText)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        return box

    def open_log_folder(self) -> None:
        folder = self.paths.log_dir
        folder.mkdir(parents=True, exist_ok=True)
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            self.show_message("Log folder", f"The log files are in:\n{folder}")

    # -- drag and drop ---------------------------------------------------------------------------
    def _build_drop_highlight(self) -> None:
        """A frame over the whole window while files are dragged over it: it says a drop is taken and what it
        does (nothing showed before the drop)."""
        frame = QLabel("Drop images or folders to diagnose them", self)
        frame.setObjectName("dropHighlight")
        frame.setAlignment(Qt.AlignmentFlag.AlignCenter)
        frame.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        frame.setStyleSheet("#dropHighlight { border: 3px dashed #2f6db5; background: rgba(47, 109, 181, 40); "
                            "color: #1d4f8c; font-size: 16pt; font-weight: bold; }")
        frame.hide()
        self.drop_highlight = frame

    def _show_drop_highlight(self, on: bool) -> None:
        if on:
            self.drop_highlight.setGeometry(self.rect())
            self.drop_highlight.raise_()
        self.drop_highlight.setVisible(on)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()
            self._show_drop_highlight(True)
        else:
            event.ignore()

    def dragLeaveEvent(self, event) -> None:
        self._show_drop_highlight(False)
        super().dragLeaveEvent(event)

    def dragMoveEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        self._show_drop_highlight(False)
        urls = event.mimeData().urls()
        if not urls:
            event.ignore()
            return
        event.acceptProposedAction()
        local = [u.toLocalFile() for u in urls if u.isLocalFile()]
        remote = [(u.toString(), "not a file on this computer") for u in urls if not u.isLocalFile()]
        self.diagnose_paths(local, rejected=remote)

    def diagnose_paths(self, paths: list[str | os.PathLike],
                       rejected: list[tuple[str, str]] | None = None) -> JobHandle:
        """Check the files on the I/O lane, then open the diagnosis dialog (or say why not)."""
        paths = [str(p) for p in paths]
        handle = self.jobs.submit(lambda ctx: scan_dropped(paths, ctx), title="Checking dropped files", lane=IO,
                                  ask_before_quit=False)
        handle.sig_done.connect(lambda scan: self._on_drop_scanned(scan, list(rejected or [])))
        return handle

    def _on_drop_scanned(self, scan: DropScan, rejected: list[tuple[str, str]]) -> None:
        rejected = rejected + scan.rejected
        if not scan.images:
            self.show_message("Nothing to diagnose",
                              "NEMO Desktop diagnoses image files (PNG, JPEG, WebP, …) or folders of them. "
                              "It could not use what was dropped:\n\n" + describe_rejected(rejected))
            return
        dialog = DiagnoseDialog(self, scan.images, rejected)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.sig_open_model_manager.connect(lambda: self.show_pane("model_manager"))
        # Shown on a later event-loop turn: building the dialog and its first layout and paint are each a few
        # ms of GUI-thread work, doubled while a job's thread competes for the GIL; apart, the window answers
        # in between (benchmarks/gui_event_loop.py).
        on_next_turn(dialog, dialog.open)

    # -- jobs ------------------------------------------------------------------------------------
    def _warm_up(self) -> None:
        from ..core.app.session import warm_up_imports

        handle = self.jobs.submit(warm_up_imports, title="Preparing", lane=IO, ask_before_quit=False,
                                  visible=False, report_errors=False)
        handle.sig_done.connect(self._report_skipped_plugins)

    def _report_skipped_plugins(self, skipped: object) -> None:
        """A broken plugin is never fatal, but never silent either: the status bar names it (the log has more)."""
        if skipped:
            names = "; ".join(str(s) for s in skipped)  # type: ignore[union-attr]
            self.show_status(f"Skipped {names}", 30000)

    def _report_job_failure(self, handle: JobHandle) -> None:
        """Never a silent failure: a failed job whose submitter did not take the error is shown here."""
        if handle.state == FAILED and handle.report_errors and handle.outcome is not None:
            self.show_error(handle.outcome.error or f"The job “{handle.title}” failed.")

    # -- panes -----------------------------------------------------------------------------------
    def _on_pane_changed(self, index: int) -> None:
        if 0 <= index < len(self.pane_actions):
            self.pane_actions[index].setChecked(True)
        if self.isVisible():
            # Widgets shown for the first time ask for their layout after Qt has scheduled the pane's paint, so a
            # pane first shown was painted, laid out again and painted again (the workbench, as a diagnosis
            # starts: 131 paint events instead of 94). Their layout requests are handled now; the pane is painted
            # before its loading jobs start, once the switch is over (Qt paints nothing while it switches).
            for _ in range(2):  # a widget's layout request posts its parent's, which one call leaves (tested)
                QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
            pane = self.current_pane()
            on_next_turn(pane, lambda: pane.ensure_shown_once(paint_first=True))

    def _after_first_paint(self) -> None:
        # Whatever the visible pane loads must not delay the window appearing (behind the welcome page: nothing).
        if not self.showing_welcome():
            QTimer.singleShot(0, self, lambda: self.current_pane().ensure_shown_once())
        QTimer.singleShot(0, self, self.model_host.start)  # the model worker process, in worker mode
        QTimer.singleShot(0, self, self.first_run.restore_last_models)  # only what is on disk: never a download
        QTimer.singleShot(WARM_UP_DELAY_MS, self, self._warm_up)

    # -- layout persistence ----------------------------------------------------------------------
    def save_layout(self) -> None:
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("window/pane", self.current_pane().NAME)
        for name, pane in self.panes.items():
            s.beginGroup(f"panes/{name}")
            pane.save_state(s)
            s.endGroup()
        s.sync()

    def restore_layout(self) -> None:
        s = self.settings
        geometry = s.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        state = s.value("window/state")
        if state is not None:
            self.restoreState(state)
        pane = s.value("window/pane")
        if pane in self.panes:
            self.tabs.setCurrentWidget(self.panes[pane])
        for name, p in self.panes.items():
            s.beginGroup(f"panes/{name}")
            p.restore_state(s)
            s.endGroup()

    # -- closing ---------------------------------------------------------------------------------
    def confirm_stop_jobs(self, jobs: list[JobHandle]) -> bool:
        names = "\n".join(f"• {h.title}" for h in jobs[:8])
        answer = QMessageBox.question(
            self, "Jobs are still running",
            f"{len(jobs)} job{'s are' if len(jobs) != 1 else ' is'} still running:\n{names}\n\n"
            "Cancel and quit? Results that are already complete stay stored.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._closing:  # a second close request while we wait for jobs to stop
            event.ignore()
            return
        if self.jobs.busy:
            asking = [h for h in self.jobs.active_jobs() if h.ask_before_quit]
            if asking and not self.confirm_stop_jobs(asking):
                event.ignore()
                return
            self._closing = True
            self.statusBar().showMessage("Stopping the running jobs…")
            self.jobs.cancel_all()
            if not self.jobs.wait(self.CLOSE_WAIT_MS):
                log.warning("closing with %d job(s) still running after %d ms: %s", len(self.jobs.active_jobs()),
                            self.CLOSE_WAIT_MS, [h.title for h in self.jobs.active_jobs()])
            self._closing = False
        self.background_settings.close()
        self.save_layout()
        # The model worker releases its models and exits (killed when a job is stuck in native code in it).
        self.model_host.stop()
        if not self.jobs.busy:  # a job stuck in native code may still use the models and the store
            self.session.close()
        event.accept()
