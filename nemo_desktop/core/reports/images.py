"""Turn stored artifacts into report-ready image bytes (bounded size, decodable, cached per build).

Artifacts are content-addressed files (PNG for images, .npy for arrays). A report shows the same input
image beside every candidate, so a build caches by (path, size, format). Two encodings:

- "png" (lossless; the default for a single diagnosis): a stored PNG that is small enough is used byte for
  byte, anything else is decoded, downscaled and re-encoded.
- "jpeg" (quality 88; the default for run reports): photographs compress about 6x better, which keeps a
  200-sample report small enough to attach to a bug report (see benchmarks/report_build.py), and fpdf2
  embeds JPEG bytes as they are instead of recompressing pixels. Images with transparency stay PNG.

Small images (dataset crops of 16-32 px) would be specks in a report, and a viewer's smooth scaling would
blur them: an image whose longer side is at most half of MIN_DISPLAY_PX is enlarged by a whole factor with
nearest neighbour before it is embedded (each pixel a sharp square), always as PNG (JPEG would smear the squares),
and its caption says its real size ("16×16 px, shown ×8"). The HTML also asks the browser for
`image-rendering: pixelated` on such images.

An artifact that is missing or unreadable yields None, and the report says so instead of failing.
"""
from __future__ import annotations

import io
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from PIL import Image

log = logging.getLogger(__name__)

_PASS_THROUGH_MODES = ("RGB", "RGBA", "L", "LA")
FORMATS = ("png", "jpeg")
JPEG_QUALITY = 88
MIN_DISPLAY_PX = 128  # images at most half this size are enlarged (nearest neighbour, whole factor) to it


def upscale_factor(longest: int, max_side: int, min_side: int = MIN_DISPLAY_PX) -> int:
    """The whole factor that enlarges an image with longer side `longest` to `min(min_side, max_side)` or
    just under it: 16 px -> x8, 32 -> x4, 64 -> x2 at 128. 1 for an image more than half that size (a 96-px
    image is readable as it is, and enlarging it would only make the report bigger)."""
    target = min(min_side, max_side)
    return max(1, target // longest) if longest > 0 else 1


@dataclass(frozen=True)
class ReportImage:
    """An image as embedded in a report: encoded bytes (PNG or JPEG) with their pixel size, a caption and
    an alt text."""

    data: bytes
    width: int
    height: int
    caption: str = ""
    alt: str = ""
    mime: str = "image/png"
    upscale: int = 1  # >1: a small image enlarged by this whole factor with nearest neighbour

    @property
    def source_size(self) -> tuple[int, int]:
        return self.width // self.upscale, self.height // self.upscale

    @property
    def size_note(self) -> str:
        """The real size of an enlarged image ("16×16 px, shown ×8"); empty otherwise."""
        if self.upscale <= 1:
            return ""
        w, h = self.source_size
        return f"{w}×{h} px, shown ×{self.upscale}"

    def with_text(self, caption: str, alt: str | None = None) -> "ReportImage":
        """The image with a caption and alt text; an enlarged image's captions say its real size."""
        note = self.size_note
        alt = alt if alt is not None else caption
        if note:
            caption = f"{caption} ({note})" if caption else note
            alt = f"{alt} ({note})" if alt else note
        return ReportImage(self.data, self.width, self.height, caption, alt, self.mime, self.upscale)


def _array_to_image(arr) -> Image.Image:
    """A stored array as a picture: 2-D floats become a grey heat map, HxWx3/4 uint8 stays colour."""
    import numpy as np  # only .npy artifacts need it; keeps `import nemo_desktop.core.reports` light

    arr = np.asarray(arr)
    if arr.ndim == 3 and arr.shape[2] in (3, 4) and arr.dtype == np.uint8:
        return Image.fromarray(arr)
    if arr.ndim == 3 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 2:
        raise ValueError(f"cannot show an array of shape {arr.shape} as an image")
    a = arr.astype(np.float64)
    lo, hi = np.nanmin(a), np.nanmax(a)
    a = (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)
    return Image.fromarray((np.nan_to_num(a) * 255).astype(np.uint8), mode="L")


def _encode(im: Image.Image, max_side: int, fmt: str) -> ReportImage:
    has_alpha = "A" in im.getbands() or "transparency" in im.info
    if im.mode not in _PASS_THROUGH_MODES:
        im = im.convert("RGBA" if has_alpha else "RGB")
    if max(im.size) > max_side:
        im = im.copy()
        im.thumbnail((max_side, max_side), Image.Resampling.BICUBIC)
    factor = upscale_factor(max(im.size), max_side)
    if factor > 1:
        im = im.resize((im.width * factor, im.height * factor), Image.Resampling.NEAREST)
    buf = io.BytesIO()
    if fmt == "jpeg" and not has_alpha and factor == 1:
        im.convert("L" if im.mode == "L" else "RGB").save(buf, format="JPEG", quality=JPEG_QUALITY)
        return ReportImage(buf.getvalue(), im.width, im.height, mime="image/jpeg")
    im.save(buf, format="PNG", compress_level=3)
    return ReportImage(buf.getvalue(), im.width, im.height, upscale=factor)


def image_from_file(path: Path, max_side: int, fmt: str = "png") -> ReportImage:
    """Raises (OSError, ValueError, ...) when the file is missing or not an image, or (PermissionError) when a
    server's roots (nemo mcp) do not include where it leads."""
    from ..base.confine import outside_reason

    outside = outside_reason(path)
    if outside is not None:
        raise PermissionError(f"{path} is not read: {outside}")
    if path.suffix.lower() == ".npy":
        import numpy as np

        return _encode(_array_to_image(np.load(path, allow_pickle=False)), max_side, fmt)
    with Image.open(path) as im:
        if (fmt == "png" and im.format == "PNG" and im.mode in _PASS_THROUGH_MODES and max(im.size) <= max_side
                and upscale_factor(max(im.size), max_side) == 1):
            im.verify()  # chunk CRCs without decoding pixels: a truncated file fails here, not in a renderer
            return ReportImage(path.read_bytes(), im.width, im.height)
        im.load()
        return _encode(im, max_side, fmt)


class ImageCache:
    """Per-build cache so that one input image shown twenty times is decoded once."""

    def __init__(self, fmt: str = "png") -> None:
        if fmt not in FORMATS:
            raise ValueError(f"image format must be one of {FORMATS}, not {fmt!r}")
        self.fmt = fmt
        self._cache: dict[tuple[str, int], ReportImage | None] = {}

    def prefetch(self, wanted: Iterable[tuple[Path | None, int]], stop: Callable[[], bool] = lambda: False) -> None:
        """Decode and encode many images on a thread pool (Pillow releases the GIL while it works); `stop`
        returning True skips what is left (cancellation)."""
        todo = list(dict.fromkeys((Path(p), side) for p, side in wanted
                                  if p is not None and (str(p), side) not in self._cache))
        if len(todo) < 8:
            return
        workers = min(8, os.cpu_count() or 2)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda ps: None if stop() else self.load(*ps), todo))

    def load(self, path: Path | None, max_side: int) -> ReportImage | None:
        if path is None:
            return None
        key = (str(path), max_side)
        if key not in self._cache:
            try:
                self._cache[key] = image_from_file(Path(path), max_side, self.fmt)
            except Exception as exc:  # a broken artifact must not sink the report; it is shown as missing
                log.warning("report: artifact %s could not be read: %s", path, exc)
                self._cache[key] = None
        return self._cache[key]
