"""Thumbnails made off the GUI thread, cached on disk and in memory.

`make_thumbnails` (a job on the I/O lane) returns QImages: QImage, unlike QPixmap, may be created in any
thread; the GUI thread turns them into pixmaps. On disk a thumbnail is a JPEG under
`get_paths().thumbnails_dir`, keyed by the image's content hash when the reference index knows it, else by
path, size and modification time, so an edited image gets a new thumbnail. `ThumbnailLoader` asks for the
thumbnails the view paints, newest requests first, a batch at a time, and drops requests that scrolled
out of sight long ago, so scrolling through 100,000 images never queues 100,000 decodes.
"""
from __future__ import annotations

import hashlib
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QImage, QPixmap

from nemo_desktop.core.base.job_context import JobContext

from .jobs import IO, JobRunner

log = logging.getLogger(__name__)

SIDE = 112  # thumbnail size in pixels (the longer side)
BATCH = 24  # thumbnails per job: large enough to amortise a job, small enough to show progress
# Thumbnail jobs at once: decoding competes for cores with the models and the window's own thread.
MAX_JOBS = max(1, min(2, (os.cpu_count() or 1) - 1))
MAX_QUEUE = 400  # requests kept; older ones have scrolled out of sight
MEMORY_ITEMS = 3000  # pixmaps kept in memory at SIDE (~ 3000 x 112 x 112 x 4 B = 150 MB at most)


def memory_items(side: int) -> int:
    """Pixmaps kept in memory at `side`: the same ~150 MB whatever size the user chose for the grid."""
    return max(200, MEMORY_ITEMS * SIDE * SIDE // (side * side))


@dataclass(frozen=True)
class ThumbRequest:
    key: object  # the caller's identifier (a dataset row)
    path: str
    sha256: str | None = None


def cache_name(path: str, sha256: str | None, side: int = SIDE) -> str | None:
    """File name of a thumbnail in the disk cache; None when the file cannot be stat()ed."""
    if sha256:
        basis = f"sha256:{sha256}"
    else:
        try:
            st = os.stat(path)
        except OSError:
            return None
        basis = f"file:{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
    digest = hashlib.sha256(f"{basis}|{side}".encode()).hexdigest()
    return f"{digest[:2]}/{digest}.jpg"


def _to_qimage(img) -> QImage:
    rgb = img.convert("RGB")
    data = rgb.tobytes()
    return QImage(data, rgb.width, rgb.height, 3 * rgb.width, QImage.Format.Format_RGB888).copy()


def make_thumbnail(req: ThumbRequest, cache_dir: Path, side: int = SIDE) -> QImage | None:
    """The cached thumbnail, or a new one written to the cache; None for an unreadable image."""
    from nemo_desktop.core.base.images import thumbnail

    name = cache_name(req.path, req.sha256, side)
    cached = cache_dir / name if name else None
    if cached is not None and cached.is_file():
        image = QImage(str(cached))
        if not image.isNull():
            return image
    try:
        img = thumbnail(req.path, side)
    except Exception as exc:  # noqa: BLE001 - an unreadable image gets the broken-image icon, not an error
        log.debug("no thumbnail for %s: %s", req.path, exc)
        return None
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
            img.save(tmp, "JPEG", quality=85)
            os.replace(tmp, cached)  # two jobs may write the same thumbnail: each write is whole
        except OSError as exc:  # a full or read-only cache only costs speed
            log.debug("thumbnail cache write failed for %s: %s", cached, exc)
    return _to_qimage(img)


def make_thumbnails(requests: list[ThumbRequest], cache_dir: Path, ctx: JobContext,
                    side: int = SIDE) -> list[tuple[object, QImage | None]]:
    out = []
    for req in requests:
        ctx.check_cancelled()
        out.append((req.key, make_thumbnail(req, cache_dir, side)))
    return out


class ThumbnailLoader(QObject):
    """Pixmaps by key, made on demand on the I/O lane. `sig_ready(keys)` says which ones arrived."""

    sig_ready = Signal(list)

    def __init__(self, runner: JobRunner, cache_dir: Path, side: int = SIDE, parent: QObject | None = None):
        super().__init__(parent)
        self.runner = runner
        self.cache_dir = Path(cache_dir)
        self.side = side
        self._pixmaps: OrderedDict[object, QPixmap] = OrderedDict()
        self._failed: set = set()
        self._queue: OrderedDict[object, ThumbRequest] = OrderedDict()
        self._in_flight: set = set()
        self._jobs: list = []
        self.generation = 0  # bumped by clear(): results of older jobs are dropped

    def pixmap(self, req: ThumbRequest) -> QPixmap | None:
        """The pixmap if ready; otherwise None, and the thumbnail is requested (newest requests first)."""
        pm = self._pixmaps.get(req.key)
        if pm is not None:
            self._pixmaps.move_to_end(req.key)
            return pm
        if req.key not in self._failed and req.key not in self._in_flight:
            self._queue[req.key] = req
            self._queue.move_to_end(req.key)
            while len(self._queue) > MAX_QUEUE:
                self._queue.popitem(last=False)
            self._pump()
        return None

    def failed(self, key) -> bool:
        return key in self._failed

    def clear(self) -> None:
        """Forget everything (another dataset was opened); running jobs finish but are ignored."""
        self.generation += 1
        self._pixmaps.clear()
        self._failed.clear()
        self._queue.clear()
        self._in_flight.clear()
        for handle in self._jobs:
            handle.cancel()

    @property
    def busy(self) -> bool:
        return bool(self._queue or self._jobs)

    def _pump(self) -> None:
        while self._queue and len(self._jobs) < MAX_JOBS:
            batch = []
            while self._queue and len(batch) < BATCH:
                _key, req = self._queue.popitem(last=True)  # most recently painted first
                batch.append(req)
            self._in_flight.update(r.key for r in batch)
            generation, cache_dir, side = self.generation, self.cache_dir, self.side
            handle = self.runner.submit(lambda ctx, b=batch: make_thumbnails(b, cache_dir, ctx, side),
                                        title="Making thumbnails", lane=IO, ask_before_quit=False, visible=False,
                                        report_errors=False)
            self._jobs.append(handle)
            handle.sig_done.connect(lambda results, g=generation: self._arrived(results, g))
            handle.sig_finished.connect(lambda _o, h=handle, b=batch, g=generation: self._job_ended(h, b, g))

    def _arrived(self, results, generation: int) -> None:
        if generation != self.generation:
            return
        keys = []
        for key, image in results:
            if image is None:
                self._failed.add(key)
            else:
                self._pixmaps[key] = QPixmap.fromImage(image)
                while len(self._pixmaps) > memory_items(self.side):
                    self._pixmaps.popitem(last=False)
            keys.append(key)
        if keys:
            self.sig_ready.emit(keys)

    def _job_ended(self, handle, batch, generation: int) -> None:
        if handle in self._jobs:
            self._jobs.remove(handle)
        if generation == self.generation:
            self._in_flight.difference_update(r.key for r in batch)
        self._pump()
