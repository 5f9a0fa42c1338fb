"""What every pane is and what it may ask of the main window (Spyder's plugin idea, kept small).

A pane lives in `panes/<name>/` with a `plugin.py` that exposes `PANE` (a `Pane` subclass) and, when it
grows, a `widgets/` folder. The window builds panes cheaply at start-up; anything costly (reading the
catalog, opening the store) goes into `on_first_shown()`, which runs when the pane is first displayed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    from nemo_desktop.core.store.paths import AppPaths

    from ..jobs import JobRunner
    from ...core.app.session import ModelSession


class PaneHost(Protocol):
    """The services the main window offers to panes."""

    jobs: "JobRunner"
    paths: "AppPaths"
    session: "ModelSession"     # models in memory, the results store (Qt-free)
    sig_models_changed: Signal  # emitted after a model was loaded or unloaded

    def show_error(self, error: dict | BaseException | str) -> QWidget: ...

    def show_message(self, title: str, text: str) -> QWidget: ...

    def show_status(self, text: str, ms: int = 8000) -> None: ...

    def show_pane(self, name: str) -> "Pane": ...


class Pane(QWidget):
    NAME: ClassVar[str]      # stable id: settings keys, object names, show_pane(name)
    TITLE: ClassVar[str]     # tab text
    SUMMARY: ClassVar[str]   # one line: what the pane is for (tooltip, About)

    def __init__(self, host: PaneHost, parent: QWidget | None = None):
        super().__init__(parent)
        self.host = host
        self.setObjectName(f"pane_{self.NAME}")
        self._shown_once = False

    def ensure_shown_once(self, paint_first: bool = False) -> None:
        """Run `on_first_shown` once. `paint_first`: paint the pane now, before its loading jobs start (their
        threads would hold the GIL that its first paint, the costliest, needs)."""
        if not self._shown_once:
            if paint_first and self.isVisible():
                self.repaint()
            self._shown_once = True
            self.on_first_shown()

    def on_first_shown(self) -> None:
        """Load what the pane needs; runs once, when the pane first becomes visible."""

    def save_state(self, settings: QSettings) -> None:
        """Persist splitter sizes, column widths, filters (inside the pane's own settings group)."""

    def restore_state(self, settings: QSettings) -> None:
        """Restore what save_state wrote; must tolerate missing keys."""
