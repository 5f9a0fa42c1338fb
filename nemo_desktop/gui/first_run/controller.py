"""Wires the first-run features into the main window without reorganising its panes (several branches edit
them): the guides are placed in the panes' empty areas, 'Try the demo' and 'Recent datasets' join the File menu,
the models in memory are remembered and, at the next start, restored when their weights are on disk.
"""
from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSizePolicy, QWidget

from nemo_desktop.core.app.worker.protocol import JobSpec

from ..jobs import GPU, IO, JobHandle
from . import memory
from .guide import DatasetGuide, NextStepBar, WelcomePage, WorkbenchGuide, next_step_html

log = logging.getLogger(__name__)


def is_first_launch(settings, remembered=None) -> bool:
    """No window was ever closed with these settings, no dataset was opened and no model remembered (in
    `remembered`, the window's BackgroundSettings; else in `settings`): the app opens on its welcome page."""
    remembered = remembered if remembered is not None else settings
    return (settings.value("window/pane") is None and not memory.recent_datasets(remembered)
            and not memory.remembered_models(remembered))


def real_diagnosis_needs(session) -> list[tuple[str, str | None, str]]:
    """(kind, catalog id, status on this computer) of the multimodal LLM and the editor a real diagnosis uses by
    default (I/O lane: reads the weights' folders)."""
    from nemo_desktop.core.models.catalog import get_entry
    from nemo_desktop.core.models.downloads import entry_status

    out = []
    loaded = session.loaded()
    for kind in ("mllm", "editor"):
        if loaded.get(kind):
            out.append((kind, loaded[kind], "in memory"))
            continue
        ref = session.default_ref(kind)
        try:
            status = entry_status(get_entry(ref)).status if ref else "none"
        except Exception:  # noqa: BLE001 - not a catalog id (a path, an endpoint): its loader checks it
            status = "not checked"
        out.append((kind, ref, status))
    return out


def demo_progress_text(p) -> str:
    """'Training the demo classifier — 42 % · less than a minute left': the job's one overall figure."""
    from ..jobs import describe_seconds_left

    text = p.stage or "Preparing the demo"
    if p.overall_fraction is not None:
        text += f" — {100 * p.overall_fraction:.0f} %"
    left = describe_seconds_left(p.seconds_left)
    return text + (f" · {left}" if left else "…")


class FirstRun(QObject):
    sig_demo_ready = Signal(object)  # DemoSetup, once its dataset is shown (and indexing has started)
    sig_steps_changed = Signal(dict)  # step -> done
    sig_restored = Signal(dict)  # {"restored": [(kind, ref)], "skipped": [(kind, ref, reason)]}

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        # Written on the window's turn (a dataset shown, a model loaded): never on its thread.
        self.settings = window.background_settings
        self.browser = window.panes["dataset_browser"]
        self.workbench = window.panes["workbench"]
        self.demo_job: JobHandle | None = None
        self.restore_job: JobHandle | None = None
        self.restore_note = ""
        # Until the remembered models were restored (or given up), what is in memory is not what to remember.
        self._record_models = not memory.remembered_models(self.settings)

        self.dataset_guide = DatasetGuide()
        self.browser.layout().insertWidget(2, self.dataset_guide)  # under the open bar and the info line
        self.workbench_guide = WorkbenchGuide()
        result_side = self.workbench.result_view.parentWidget().layout()
        result_side.insertWidget(result_side.indexOf(self.workbench.result_view), self.workbench_guide)
        for guide in (self.dataset_guide, self.workbench_guide):
            guide.sig_try_demo.connect(self.try_demo)
            guide.sig_show_pane.connect(window.show_pane)
        self.dataset_guide.sig_open_folder.connect(self.browser.choose_folder)
        self.dataset_guide.sig_open_csv.connect(self.browser.choose_csv)
        self.dataset_guide.sig_open_recent.connect(self.open_recent)
        # The first launch's page (main_window puts it in front of the tabs) and, after the demo, the next step.
        self.welcome = WelcomePage()
        self.welcome.sig_try_demo.connect(self.try_demo)
        self.welcome.sig_show_pane.connect(window.show_pane)
        self.welcome.sig_open_dataset.connect(window.open_dataset)
        self.welcome.sig_continue.connect(lambda: window.show_pane(window.current_pane().NAME))
        self.next_step = NextStepBar()
        self.next_step.sig_show_pane.connect(window.show_pane)
        self.browser.layout().insertWidget(2, self.next_step)
        # Without a dataset the grid is hidden: this takes its room, so the rows above keep their places
        # instead of spreading down the pane with large gaps between them.
        self.browser_filler = QWidget()
        self.browser_filler.setObjectName("browserEmptyFiller")
        self.browser_filler.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        layout = self.browser.layout()
        layout.insertWidget(layout.indexOf(self.browser.splitter) + 1, self.browser_filler, 1)
        self._build_menu()

        window.sig_models_changed.connect(self._models_changed)
        self.browser.sig_opened.connect(self._dataset_opened)
        self.workbench.sig_results_shown.connect(lambda _r: self.refresh())
        rows = self.workbench.sample_list.model()
        for sig in (rows.rowsInserted, rows.rowsRemoved, rows.modelReset):
            sig.connect(self._samples_changed)
        self._show_recent()
        self.refresh()

    # -- menu ---------------------------------------------------------------------------------------------
    def _build_menu(self) -> None:
        w = self.window
        file_menu = next(a.menu() for a in w.menuBar().actions() if a.menu() and w.action_quit in a.menu().actions())
        actions = file_menu.actions()
        at = actions.index(w.action_quit)
        before = actions[at - 1] if at and actions[at - 1].isSeparator() else w.action_quit
        self.recent_menu = QMenu("Recent &datasets", file_menu)
        self.recent_menu.setObjectName("recentDatasetsMenu")
        self.action_demo = QAction("&Try the demo", self)
        self.action_demo.setStatusTip("Write a small digits dataset and train a small classifier (offline)")
        self.action_demo.triggered.connect(self.try_demo)
        file_menu.insertMenu(before, self.recent_menu)
        file_menu.insertAction(before, self.action_demo)

    def _show_recent(self) -> None:
        paths = memory.recent_datasets(self.settings)
        self.dataset_guide.set_recent(paths)
        self.recent_menu.clear()
        for p in paths:
            self.recent_menu.addAction(p, lambda _c=False, p=p: self.open_recent(p))
        if not paths:
            self.recent_menu.addAction("No recent datasets").setEnabled(False)

    def open_recent(self, path: str) -> JobHandle | None:
        if not Path(path).exists():
            memory.remove_recent_dataset(self.settings, path)
            self._show_recent()
            self.window.show_status(f"{path} is no longer there; removed from the recent datasets.")
            return None
        self.window.show_pane("dataset_browser")
        return self.browser.open_path(path)

    def _dataset_opened(self, _data) -> None:
        if self.browser.dataset_path:
            memory.add_recent_dataset(self.settings, self.browser.dataset_path)
            self._show_recent()
        self.refresh()

    # -- the steps ----------------------------------------------------------------------------------------
    def steps(self) -> dict[str, bool]:
        data = self.browser.data
        return {"classifier": "classifier" in self.window.session.loaded(),
                "dataset": data is not None and data.indexed,
                "sample": any(s.pred_label is not None and s.pred_label != s.true_label
                              for s in self.workbench.samples),
                "diagnose": bool(self.workbench.result_view.columns)}

    def _samples_changed(self, *_args) -> None:
        try:
            self.refresh()
        except RuntimeError:  # the list also empties while the window is destroyed, after the guide
            pass

    def refresh(self) -> dict[str, bool]:
        steps = self.steps()
        self.workbench_guide.set_steps(steps)
        self.welcome.guide.set_steps(steps)
        self.welcome.set_something_here(steps["classifier"] or steps["dataset"] or self.browser.data is not None)
        self.workbench_guide.setVisible(not steps["diagnose"])  # the guide fills the empty result area
        empty = self.browser.data is None
        self.dataset_guide.setVisible(empty)
        self.browser.splitter.setVisible(not empty)  # the guide takes the empty grid's place (and height)
        self.browser_filler.setVisible(empty)
        self.sig_steps_changed.emit(steps)
        return steps

    # -- models: remember, restore ------------------------------------------------------------------------
    def _models_changed(self) -> None:
        if self._record_models:
            # What the user loaded, also while a new model process loads it again (its loaded() is empty then).
            memory.remember_models(self.settings, self.window.session.wanted_refs())
        self.refresh()

    def restore_last_models(self) -> JobHandle | None:
        """Load the models that were in memory at the end of the last session, when their weights are on disk."""
        wanted = memory.remembered_models(self.settings)
        if not wanted:
            self._record_models = True
            return None
        handle = self.window.jobs.submit(JobSpec("nemo_desktop.core.app.jobs.models:restore_models", (wanted,)),
                                         title="Restoring the last models", lane=GPU, ask_before_quit=False)
        handle.sig_done.connect(self._restored)
        handle.sig_finished.connect(lambda _o: self._restore_finished())
        self.restore_job = handle
        return handle

    def _restored(self, outcome: dict) -> None:
        self.restore_note = memory.describe_restore(outcome)
        if outcome["skipped"]:  # quietly: a note in the guide and the status bar, no dialog
            log.info("start-up restore: %s", self.restore_note)
            self.workbench_guide.set_note(self.restore_note)
        if self.restore_note:
            self.window.show_status(self.restore_note, 15000)
        self.sig_restored.emit(outcome)

    def _restore_finished(self) -> None:
        self._record_models = True
        self.window.sig_models_changed.emit()

    # -- the demo -----------------------------------------------------------------------------------------
    def try_demo(self) -> JobHandle:
        if self.demo_job is not None and self.demo_job.active:
            return self.demo_job
        handle = self.window.jobs.submit(JobSpec("nemo_desktop.core.app.jobs.models:prepare_and_load_demo",
                                                 (self.window.paths,)),
                                         title="Preparing the demo (digits dataset and classifier)", lane=GPU)
        self.demo_job = handle
        self._demo_status("Preparing the demo…", busy=True)
        handle.sig_progress.connect(lambda p: self._demo_status(demo_progress_text(p), busy=True))
        handle.sig_done.connect(self._demo_prepared)
        handle.sig_failed.connect(lambda e: self._demo_status(f"The demo could not be prepared: "
                                                              f"{e.get('message')}", busy=False))
        handle.sig_cancelled.connect(lambda: self._demo_status("Demo cancelled.", busy=False))
        return handle

    def _demo_status(self, text: str, busy: bool) -> None:
        for guide in (self.dataset_guide, self.workbench_guide, self.welcome.guide):
            guide.set_demo_status(text, busy)

    def _demo_prepared(self, setup) -> None:
        self.window.sig_models_changed.emit()
        made = "reused" if setup.reused_classifier else f"trained in {setup.train_seconds:.0f} s"
        self._demo_status(f"Demo ready: {setup.images} digits in {setup.dataset_dir}; classifier "
                          f"{setup.classifier_id} ({made}, {100 * setup.holdout_accuracy:.1f}% on held-out "
                          "digits). Indexing the dataset with it…", busy=False)
        session = self.window.session
        needs = self.window.jobs.submit(lambda ctx: real_diagnosis_needs(session), title="Checking the models",
                                        lane=IO, visible=False, ask_before_quit=False)
        needs.sig_done.connect(lambda found: self._show_next_step(setup, found))
        self.window.show_pane("dataset_browser")
        opening = self.browser.open_path(setup.dataset_dir)

        def shown(data) -> None:
            if not data.indexed:  # 360 small images: a few seconds on a CPU
                self.browser.index_dataset()
            self.sig_demo_ready.emit(setup)

        opening.sig_done.connect(shown)

    def _show_next_step(self, setup, needs) -> None:
        html = next_step_html(setup, needs)
        self._demo_status(f"Demo ready: {setup.images} digits, classifier {setup.classifier_id}.",
                          busy=False)  # the next step (below) says what to do; no stale "Indexing…"
        self.next_step.set_text(html)
        self.welcome.set_next_step(html)
        self.workbench_guide.set_note(html)
