"""What the Model manager's settings panels share: the settings are read and written on the I/O lane through
`ModelSession` (atomic, validated by the core), and the panel always shows what is stored."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from ....jobs import IO


class SettingsView(QWidget):
    sig_use_endpoint = Signal(str)  # endpoint name to load as the captioning model

    def __init__(self, host, parent: QWidget | None = None):
        super().__init__(parent)
        self.host = host
        self.settings = None
        self._populating = False  # True while _show sets the widgets: their change signals save nothing

    def _show(self, settings) -> None:
        raise NotImplementedError

    def reload(self):
        handle = self.host.jobs.submit(lambda ctx: self.host.session.settings(), title="Reading settings", lane=IO,
                                       ask_before_quit=False, visible=False)
        handle.sig_done.connect(self._show)
        return handle

    def _update(self, change, title: str, then=None):
        """Apply `change(settings)` on the I/O lane; errors go to the error dialog; the view shows the result."""
        handle = self.host.jobs.submit(lambda ctx: self.host.session.update_settings(change), title=title, lane=IO,
                                       ask_before_quit=False, visible=False)
        handle.sig_done.connect(self._show)
        if then is not None:
            handle.sig_done.connect(lambda _s: then())
        handle.sig_failed.connect(lambda _e: self.reload())  # show what is really stored
        return handle
