"""Click-to-zoom for every image in the app: a clickable image label and the viewer window it opens.

`ClickableImage` shows an image fitted to a box (`fit_pixmap`: large images smoothly reduced, small ones
enlarged by a whole factor with nearest neighbour so a 32-px image is not a speck) and opens
`ImageViewerDialog` on a click: the image at full resolution in a `ZoomableImageView`, with Fit, 1:1 and
zoom buttons and its pixel size said in words. The viewer opens at once on the copy already in memory and
reads the file on a pool thread (a 12-MP JPEG takes ~0.5 s to decode), then shows it at full resolution.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal
from PySide6.QtGui import QImage, QImageReader, QKeySequence, QPixmap, QShortcut
from PySide6.QtWidgets import QDialog, QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from .zoom_view import WHEEL_STEP, ZoomableImageView

MAX_VIEW_SIDE = 8192  # larger images are read reduced: the viewer is for looking, not for 100-MP decoding


def fit_pixmap(image: QImage | QPixmap, side: int) -> QPixmap:
    """`image` fitted into a `side` square: reduced smoothly when larger, enlarged by the largest whole factor
    with nearest neighbour when it fits at least twice (each pixel stays a sharp square)."""
    pixmap = image if isinstance(image, QPixmap) else QPixmap.fromImage(image)
    longest = max(pixmap.width(), pixmap.height(), 1)
    if longest > side:
        return pixmap.scaled(side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
    factor = side // longest
    if factor >= 2:
        return pixmap.scaled(pixmap.width() * factor, pixmap.height() * factor, Qt.AspectRatioMode.KeepAspectRatio,
                             Qt.TransformationMode.FastTransformation)
    return pixmap


def read_image(path: str | Path) -> QImage | None:
    """The image file at (up to) full resolution, EXIF orientation applied; None when it cannot be read."""
    reader = QImageReader(str(path))
    reader.setAutoTransform(True)
    size = reader.size()
    if size.isValid() and max(size.width(), size.height()) > MAX_VIEW_SIDE:
        reader.setScaledSize(size.scaled(MAX_VIEW_SIDE, MAX_VIEW_SIDE, Qt.AspectRatioMode.KeepAspectRatio))
    image = reader.read()
    return None if image.isNull() else image


def size_in_words(image: QImage | QPixmap) -> str:
    return f"{image.width()}\u00d7{image.height()} px"


class _ReadSignals(QObject):
    sig_read = Signal(object)  # QImage, or None when the file cannot be read


class _ReadFile(QRunnable):
    """Decodes one file on Qt's global thread pool (QImage may be made in any thread)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.signals = _ReadSignals()

    def run(self) -> None:
        image = read_image(self.path)
        try:
            self.signals.sig_read.emit(image)
        except RuntimeError:  # the application is closing and took the signal object with it: nobody waits
            pass


class ImageViewerDialog(QDialog):
    """One image, zoomable and pannable. Not modal: several can be open to compare images. With `path`, the
    file is read off the GUI thread and replaces `image` (a reduced copy, or None) when it arrives;
    `sig_loaded` then says whether it could be read."""

    sig_loaded = Signal(bool)

    def __init__(self, image: QImage | None, title: str = "Image", caption: str = "", parent: QWidget | None = None,
                 path: str | Path | None = None):
        super().__init__(parent)
        self.setObjectName("imageViewer")
        self.setWindowTitle(title)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.view = ZoomableImageView()
        self.zoom_label = QLabel("")
        self.zoom_label.setObjectName("zoomLabel")
        image = image if image is not None and not image.isNull() else QImage()
        self.size_text = size_in_words(image) + (" (reduced copy; reading the file…)" if path else "")
        buttons = QHBoxLayout()
        for text, tip, slot, name in (
                ("Fit", "Show the whole image (F)", self.view.fit, "fitButton"),
                ("1:1", "One image pixel per screen pixel (1)", self.view.actual_size, "actualSizeButton"),
                ("+", "Zoom in (+ or the mouse wheel)", lambda: self.view.zoom_by(WHEEL_STEP), "zoomInButton"),
                ("\u2212", "Zoom out (- or the mouse wheel)", lambda: self.view.zoom_by(1 / WHEEL_STEP),
                 "zoomOutButton")):
            b = QPushButton(text)
            b.setObjectName(name)
            b.setToolTip(tip)
            b.setAutoDefault(False)
            b.clicked.connect(slot)
            buttons.addWidget(b)
        buttons.addWidget(self.zoom_label, 1)
        for keys, slot in (("F", self.view.fit), ("1", self.view.actual_size),
                           ("+", lambda: self.view.zoom_by(WHEEL_STEP)), ("=", lambda: self.view.zoom_by(WHEEL_STEP)),
                           ("-", lambda: self.view.zoom_by(1 / WHEEL_STEP))):
            QShortcut(QKeySequence(keys), self, slot)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(self.view, 1)
        if caption:
            cap = QLabel(caption)
            cap.setObjectName("imageCaption")
            cap.setWordWrap(True)
            cap.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            layout.addWidget(cap)
        layout.addWidget(QLabel("Wheel: zoom around the cursor \u00b7 drag: pan \u00b7 F: fit \u00b7 1: actual size"))
        self.view.sig_zoom_changed.connect(self._zoom_changed)
        self.resize(min(1000, max(420, image.width() + 40)), min(800, max(380, image.height() + 120)))
        if not image.isNull():
            self.view.set_image(image)
        self._reader: _ReadFile | None = None
        if path:
            self._reader = _ReadFile(str(path))
            self._reader.signals.sig_read.connect(self._full_read, Qt.ConnectionType.QueuedConnection)
            QThreadPool.globalInstance().start(self._reader)

    def _full_read(self, image: QImage | None) -> None:
        try:
            self._show_full(image)
        except RuntimeError:  # the dialog was closed (and deleted) before the file was read
            pass

    def _show_full(self, image: QImage | None) -> None:
        self._reader = None
        if image is None:
            shown = self.view.item.pixmap()
            self.size_text = ("The file could not be read" if shown.isNull()
                              else f"{size_in_words(shown)} (the copy in memory: the file could not be read)")
            self._zoom_changed(self.view.scale_factor)
            self.sig_loaded.emit(False)
            return
        fitted = self.view.fitted
        self.size_text = size_in_words(image)
        self.view.set_image(image)
        if not fitted:
            self.view.actual_size()
        self._zoom_changed(self.view.scale_factor)
        self.sig_loaded.emit(True)

    def _zoom_changed(self, scale: float) -> None:
        self.zoom_label.setText(f"{self.size_text} \u00b7 zoom {scale * 100:.0f}%")

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.view.fitted:
            self.view.fit()  # the viewport has its real size only now


def open_image_viewer(parent: QWidget | None, image: QImage | None, title: str, caption: str = "",
                      path: str | Path | None = None) -> ImageViewerDialog | None:
    """Open a viewer on `image` (a copy in memory) that shows the file at `path` at full resolution once read.
    None when there is neither."""
    if (image is None or image.isNull()) and not path:
        return None
    dialog = ImageViewerDialog(image, title, caption, parent, path=path)
    dialog.show()
    return dialog


class ClickableImage(QLabel):
    """An image in a fixed box that opens the zoomable viewer when clicked. An owner that opens something
    else (the before/after comparison) sets `on_click`."""

    def __init__(self, side: int, parent: QWidget | None = None):
        super().__init__(parent)
        self.side = side
        self.image: QImage | None = None
        self.path: str | None = None
        self.title = "Image"
        self.caption = ""
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setFixedSize(side, side)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.on_click = self.open_viewer

    def set_image(self, image: QImage | None, *, path: str | Path | None = None, title: str = "Image",
                  caption: str = "") -> None:
        self.image, self.path, self.title = image, str(path) if path else None, title
        if image is None or image.isNull():
            self.setText("(no image)")
            self.setCursor(Qt.CursorShape.ArrowCursor)
            self.setToolTip("")
            return
        self.setPixmap(fit_pixmap(image, self.side - 4))
        self.caption = caption
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip(f"{size_in_words(image)} as shown here. Click to zoom.")

    def mouseReleaseEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.image is not None and self.rect().contains(
                event.position().toPoint()):
            self.on_click()
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def open_viewer(self) -> ImageViewerDialog | None:
        return open_image_viewer(self.window(), self.image, self.title, self.caption, self.path)
