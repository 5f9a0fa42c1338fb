"""Readable grid images: the thumbnail-size slider and the zoomable view of the image under the cursor.

`ThumbnailSizeControl` sets the grid's thumbnail size (48-256 px) and is saved with the pane's state in the
GUI settings file (gui/settings.py), so the next window opens at the same size. `attach_image_viewer` lets
the user open the current grid image at full resolution, zoomable: Space (as in a file manager's quick
look), the context menu, or the browser's "View image" button.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSettings, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QListView, QSlider, QWidget

from ....widgets.image_viewer import ImageViewerDialog, open_image_viewer
from .grid import MAX_SIDE, MIN_SIDE, SIDE, set_thumbnail_side

SETTINGS_KEY = "thumbnail_size"
STEP = 16


class ThumbnailSizeControl(QWidget):
    def __init__(self, view: QListView, parent: QWidget | None = None):
        super().__init__(parent)
        self.view = view
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("thumbnailSize")
        self.slider.setRange(MIN_SIDE, MAX_SIDE)
        self.slider.setSingleStep(STEP)
        self.slider.setPageStep(STEP * 2)
        self.slider.setValue(SIDE)
        self.slider.setFixedWidth(100)
        self.slider.setToolTip("Thumbnail size in the grid")
        self.value_label = QLabel(f"{SIDE} px")
        self.value_label.setObjectName("thumbnailSizeLabel")
        self.value_label.setMinimumWidth(self.value_label.fontMetrics().horizontalAdvance("256 px") + 4)
        self.slider.valueChanged.connect(self._changed)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("Thumbnails:"))
        layout.addWidget(self.slider)
        layout.addWidget(self.value_label)

    @property
    def side(self) -> int:
        return self.slider.value()

    def set_side(self, side: int) -> None:
        self.slider.setValue(side)
        self._changed(self.slider.value())

    def _changed(self, side: int) -> None:
        used = set_thumbnail_side(self.view, side)
        self.value_label.setText(f"{used} px")

    def save_state(self, settings: QSettings) -> None:
        settings.setValue(SETTINGS_KEY, self.side)

    def restore_state(self, settings: QSettings) -> None:
        try:
            side = int(settings.value(SETTINGS_KEY, SIDE))
        except (TypeError, ValueError):  # a hand-edited settings file: keep the default
            side = SIDE
        self.set_side(side)


def view_current_image(pane) -> ImageViewerDialog | None:
    """Open the grid's current image (the one last clicked) zoomable, at full resolution."""
    index = pane.grid.currentIndex()
    d = pane.data
    if d is None or not index.isValid():
        return None
    r = pane.grid_model.dataset_row(index)
    path = d.paths[r]
    caption = f"True class: {d.class_names[d.labels[r]]}"
    if d.preds[r] >= 0:
        caption += f" \u00b7 predicted: {d.class_names[d.preds[r]]} (p = {d.conf[r]:.3f})"
    thumb = pane.thumbnails.pixmap(pane.grid_model.thumb_request(r))  # shown until the file is read
    return open_image_viewer(pane.window(), thumb.toImage() if thumb is not None else None, Path(path).name,
                             f"{path}\n{caption}", path=path)


class _SpaceOpens(QObject):
    """Space on the grid opens the current image (the list view would otherwise toggle its selection)."""

    def __init__(self, pane):
        super().__init__(pane.grid)
        self.pane = pane

    def eventFilter(self, obj, event) -> bool:
        if (event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Space
                and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier):
            view_current_image(self.pane)
            return True
        return False


def attach_image_viewer(pane) -> None:
    """Space opens the current image in the zoomable viewer (the pane's context menu offers it too)."""
    pane.grid.installEventFilter(_SpaceOpens(pane))
