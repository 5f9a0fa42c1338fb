"""A zoomable, pannable image view (QGraphicsView), the base of the image viewer and the comparison views.

The wheel zooms around the point under the cursor (that point stays put, as in napari and image viewers), a
left-button drag pans, `fit()` shows the whole image and keeps it fitted while the window is resized, and
`actual_size()` shows one image pixel per screen pixel. Zoomed in, pixels are drawn as crisp squares
(nearest neighbour) so that a 32-px dataset image shows its real pixels; zoomed out, smooth downscaling
avoids aliasing.
"""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QImage, QPainter, QPixmap, QWheelEvent
from PySide6.QtWidgets import QFrame, QGraphicsPixmapItem, QGraphicsScene, QGraphicsView, QWidget

MIN_SCALE, MAX_SCALE = 1 / 32, 64.0
WHEEL_STEP = 1.25  # zoom factor per wheel notch (120 angle-delta units)


class ZoomableImageView(QGraphicsView):
    """One image on a scene. `sig_zoom_changed(scale)` after every zoom (1.0 = one image pixel per screen
    pixel)."""

    sig_zoom_changed = Signal(float)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("zoomableImageView")
        self.setScene(QGraphicsScene(self))
        self.item = QGraphicsPixmapItem()
        self.scene().addItem(self.item)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        # Zooming keeps the scene point under the cursor in place ourselves (see zoom_by): Qt's own
        # AnchorUnderMouse needs mouse tracking and ignores positions given by code.
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setBackgroundBrush(Qt.GlobalColor.darkGray)
        self.fitted = True  # keep fitting on resize until the user zooms

    # -- content ------------------------------------------------------------------------------------
    def set_image(self, image: QImage | QPixmap) -> None:
        pixmap = image if isinstance(image, QPixmap) else QPixmap.fromImage(image)
        self.item.setPixmap(pixmap)
        self.scene().setSceneRect(QRectF(pixmap.rect()))
        self.fit()

    def image_size(self) -> tuple[int, int]:
        pm = self.item.pixmap()
        return pm.width(), pm.height()

    # -- zoom -----------------------------------------------------------------------------------------
    @property
    def scale_factor(self) -> float:
        return self.transform().m11()

    def zoom_by(self, factor: float, anchor: QPoint | None = None) -> None:
        """Zoom by `factor`, keeping the scene point under `anchor` (viewport coordinates; default: the
        centre) where it is."""
        old = self.scale_factor
        new = min(MAX_SCALE, max(MIN_SCALE, old * factor))
        if new == old:
            return
        anchor = anchor if anchor is not None else self.viewport().rect().center()
        scene_point = self.mapToScene(anchor)
        self.scale(new / old, new / old)
        self.fitted = False
        self._keep_under(scene_point, anchor)
        self._zoom_changed()

    def set_scale(self, scale: float) -> None:
        self.zoom_by(scale / self.scale_factor)

    def fit(self) -> None:
        """The whole image in the window; small images are enlarged by whole pixel multiples."""
        w, h = self.image_size()
        if not w or not h:
            return
        view = self.viewport().rect()
        s = min(view.width() / w, view.height() / h) * 0.98
        if s > 1:
            s = float(int(s))  # crisp: every image pixel becomes the same number of screen pixels
        s = min(MAX_SCALE, max(MIN_SCALE, s))
        self.resetTransform()
        self.scale(s, s)
        self.centerOn(self.item)
        self.fitted = True
        self._zoom_changed()

    def actual_size(self) -> None:
        """One image pixel per screen pixel."""
        self.resetTransform()
        self.centerOn(self.item)
        self.fitted = False
        self._zoom_changed()

    def _keep_under(self, scene_point: QPointF, anchor: QPoint) -> None:
        moved = self.mapFromScene(scene_point) - anchor
        self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() + moved.x())
        self.verticalScrollBar().setValue(self.verticalScrollBar().value() + moved.y())

    def _zoom_changed(self) -> None:
        # Nearest neighbour from 1:1 upwards (each pixel a sharp square), smooth below (no aliasing).
        crisp = self.scale_factor >= 1
        self.item.setTransformationMode(Qt.TransformationMode.FastTransformation if crisp
                                        else Qt.TransformationMode.SmoothTransformation)
        self.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, not crisp)
        self.sig_zoom_changed.emit(self.scale_factor)

    # -- events ---------------------------------------------------------------------------------------
    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120
        if steps:
            self.zoom_by(WHEEL_STEP ** steps, event.position().toPoint())
        event.accept()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.fitted:
            self.fit()
