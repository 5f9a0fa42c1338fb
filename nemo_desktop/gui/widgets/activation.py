"""Item views that do not repaint when their window is activated or deactivated.

Qt's item views repaint their whole viewport on every WindowActivate / WindowDeactivate, whatever the
palette (`QAbstractItemView::viewportEvent`), and opening any dialog deactivates the main window: the
thumbnail grid and the tables then ask Python for every visible cell again, while a job holds the GIL.
With one palette for active and inactive windows (`gui.app.use_one_palette_when_inactive`) that repaint
draws the same pixels, so it is skipped. Focus changes still repaint the current item (focus events are
untouched).
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QAbstractItemView, QWidget

_ACTIVATION = (QEvent.Type.WindowActivate, QEvent.Type.WindowDeactivate)
_FILTER_NAME = "skipActivationRepaints"


def draws_alike_when_inactive(palette: QPalette) -> bool:
    return palette.isEqual(QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive)


class _SkipActivationRepaints(QObject):
    """Stops the activation events at the view (the view itself gets few events of its own; its viewport,
    which gets every paint, is left without a Python filter)."""

    def eventFilter(self, obj, event) -> bool:
        return event.type() in _ACTIVATION and draws_alike_when_inactive(obj.palette())


def skip_activation_repaints(root: QWidget) -> int:
    """Install the filter on every item view under `root` (one shared filter; again-safe). Returns how many
    views got it now."""
    found = root.findChild(_SkipActivationRepaints, _FILTER_NAME)
    if found is None:
        found = _SkipActivationRepaints(root)
        found.setObjectName(_FILTER_NAME)
    n = 0
    for view in root.findChildren(QAbstractItemView):
        if not view.property(_FILTER_NAME):
            view.installEventFilter(found)
            view.setProperty(_FILTER_NAME, True)
            n += 1
    return n
