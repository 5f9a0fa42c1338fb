"""The result side of an analysis' page: a finished run's result rendered as its report section renders it
(again, keeping the reader's place, when it changes), and exported as that report (HTML or PDF) or, for model
differences, as CSV. A mixin of the Analyses pane (plugin.py): it reads the pane's page state and widgets."""
from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QFileDialog

from ...jobs import IO, JobHandle
from ...widgets.report_html import set_report_html
from ...widgets.report_path import ask_report_path
from ....core.app.jobs.analyses import export_result, result_html


def is_model_diff(result: Any) -> bool:
    return getattr(result, "analysis", None) == "model-diff" and hasattr(result, "iterations")


class PageResults:
    """Rendering and exporting the result of the page shown (or of the page whose run just finished)."""

    def _on_done(self, name: str, result: Any) -> None:
        state = self.state(name)
        state.result = result
        # Stored results are read back after a restart (page_memory.py); an unstored one is not remembered.
        state.result_key = getattr(result, "key", None) or getattr(result, "result_key", None)
        if state.result_key:
            self._keep_timer.start()  # the key is written too (page_memory.keep)
        store = self.host.session.store()
        handle = self.host.jobs.submit(lambda ctx: result_html(result, store, ctx), title="Rendering the result",
                                       lane=IO, visible=False)
        handle.sig_done.connect(lambda html: self._show_html(name, result, html))

    def rerender(self) -> JobHandle | None:
        """Render the shown result again (it changed: e.g. a failure-mode sentence was validated with CEI),
        keeping the reader's place in it."""
        if self.result is None:
            return None
        name, result, store = self.shown_name(), self.result, self.host.session.store()
        handle = self.host.jobs.submit(lambda ctx: result_html(result, store, ctx), title="Rendering the result",
                                       lane=IO, visible=False)
        handle.sig_done.connect(lambda html: self._refresh_html(name, result, html))
        return handle

    def _refresh_html(self, name: str, result: Any, html: str) -> None:
        state = self.state(name)
        if state.result is not result:
            return  # a newer run replaced it
        state.html = html
        if name != self.shown_name():
            return
        bar = self.result_view.verticalScrollBar()
        where = bar.value()
        set_report_html(self.result_view, html)
        bar.setValue(where)
        self.sig_result_rerendered.emit()

    def _show_html(self, name: str, result: Any, html: str) -> None:
        state = self.state(name)
        if state.result is not result:
            return
        state.html = html
        if name != self.shown_name():
            return  # shown when its page is
        set_report_html(self.result_view, html)
        self.failure_modes.set_result(result)
        self.fix_actions.set_result(result)
        if is_model_diff(result):
            self.model_diff_live.show_records(result.iterations)
        self._update_buttons()
        self.sig_result_shown.emit(result)

    def export(self, path: str | None = None) -> JobHandle | None:
        if self.result is None:
            return None
        path = path or ask_report_path(self, "Export report", f"{self.page.spec.name}.html")
        if path is None:
            return None
        result, store = self.result, self.host.session.store()
        handle = self.host.jobs.submit(lambda ctx: export_result(result, store, path, ctx), title="Exporting",
                                       lane=IO)
        handle.sig_done.connect(lambda p: self.host.show_status(f"Report written to {p}"))
        return handle

    def export_csv(self, path: str | None = None) -> JobHandle | None:
        """A model-diff result's differences to `path` and its scores beside it (diff.csv, diff.scores.csv)."""
        from nemo_desktop.core.analyses.model_diff.tables import write_csv_export

        if not is_model_diff(self.result):
            return None
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "Export CSV", "model-diff.csv", "CSV (*.csv)")
            if not path:
                return None
        result = self.result
        handle = self.host.jobs.submit(lambda ctx: write_csv_export(result, path), title="Exporting CSV", lane=IO)
        handle.sig_done.connect(lambda paths: self.host.show_status("CSV written to " + " and ".join(map(str, paths))))
        return handle
