"""Click-to-zoom for the images inside rich text (the analyses pane shows its result as report HTML).

A click on an image in a QTextBrowser opens it in the zoomable viewer: the image is found from the text
cursor under the mouse (an image is one character whose format names its resource) and taken from the
document's resources, so `data:` images embedded by the report builder need no file.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QImage, QPixmap, QTextCursor, QTextDocument
from PySide6.QtWidgets import QTextBrowser

from .image_viewer import ImageViewerDialog, open_image_viewer


def image_at(browser: QTextBrowser, pos: QPoint) -> QImage | None:
    """The image under viewport position `pos`, or None (text, margins, nothing)."""
    doc_point = QPointF(pos + QPoint(browser.horizontalScrollBar().value(), browser.verticalScrollBar().value()))
    index = browser.document().documentLayout().hitTest(doc_point, Qt.HitTestAccuracy.ExactHit)
    if index < 0:
        return None
    cursor = QTextCursor(browser.document())
    for at in (index + 1, index):  # charFormat() is the format of the character before the cursor
        if at > browser.document().characterCount() - 1:
            continue
        cursor.setPosition(at)
        fmt = cursor.charFormat()
        if fmt.isImageFormat():
            name = QUrl(fmt.toImageFormat().name())
            resource = browser.document().resource(QTextDocument.ResourceType.ImageResource.value, name)
            image = resource.toImage() if isinstance(resource, QPixmap) else resource
            if isinstance(image, QImage) and not image.isNull():
                return image
    return None


class _ClickOpens(QObject):
    def __init__(self, browser: QTextBrowser):
        super().__init__(browser)
        self.browser = browser

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.MouseButtonRelease and event.button() == Qt.MouseButton.LeftButton:
            if not self.browser.textCursor().hasSelection():
                open_image_under(self.browser, event.position().toPoint())
        return False


def open_image_under(browser: QTextBrowser, pos) -> ImageViewerDialog | None:
    image = image_at(browser, pos)
    if image is None:
        return None
    return open_image_viewer(browser.window(), image, "Image from the result")


def attach_zoom_to_text_browser(browser: QTextBrowser) -> None:
    """Clicking an image in `browser` opens it zoomable."""
    browser.viewport().installEventFilter(_ClickOpens(browser))
