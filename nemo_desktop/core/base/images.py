"""Safe image loading: any file a user drops in becomes an RGB PIL image, or a clear InputImageError.

Handled: CMYK (ICC-aware when the file carries a profile), 16-bit and float greyscale (scaled, not clipped),
palette/LA/RGBA transparency (composited on white), EXIF orientation, decompression bombs (the pixel
count is checked from the header before any pixels are decoded), truncated files, empty files and files
that are not images. Only raster formats are opened (no EPS/PDF/WMF, which hand the file to other
programs). Truncation is detected as long as nobody sets PIL's global `ImageFile.LOAD_TRUNCATED_IMAGES`.
"""
from __future__ import annotations

import base64
import io
import logging
import os
import stat
import struct
from pathlib import Path
from typing import Union

from PIL import Image, ImageOps, UnidentifiedImageError

from nemo_desktop.core.base.errors import InputImageError
from nemo_desktop.core.base.image_borders import border_for, crop_border

log = logging.getLogger(__name__)

ImageSource = Union[str, os.PathLike, bytes]

DEFAULT_MAX_PIXELS = 64_000_000

# Raster formats PIL decodes itself; anything else is refused before decoding.
ALLOWED_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "DIB", "TIFF", "PPM", "TGA", "ICO", "AVIF", "QOI")

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".gif", ".bmp", ".dib",
                              ".tif", ".tiff", ".ppm", ".pgm", ".pbm", ".pnm", ".tga", ".avif", ".qoi"})

_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, struct.error)
_SUPPORTED_HINT = "Use a JPEG, PNG, WebP, BMP, GIF or TIFF file."


def is_image_file(path: str | os.PathLike) -> bool:
    """True when the file name has a supported image extension (content is checked by load_image)."""
    return Path(path).suffix.lower() in IMAGE_EXTENSIONS


def load_image(src: ImageSource, *, max_pixels: int = DEFAULT_MAX_PIXELS, max_side: int | None = None,
               name: str | None = None, draft_side: int | None = None) -> Image.Image:
    """Decode `src` (a path or the file's bytes) into an RGB image, orientation applied.

    `max_pixels` rejects images whose header declares more pixels (decompression-bomb guard).
    `max_side` downscales so that the longer side is at most this (JPEGs decode at reduced scale, fast).
    `name` labels bytes in error messages.
    `draft_side` lets a JPEG decode at reduced DCT scale as long as both sides stay at least this long (no
    further resize: the caller's own preprocessing resizes; see data/input_pipeline.py).
    """
    label, fp = _open_source(src, name)
    try:
        try:
            img = Image.open(fp, formats=_open_formats())
        except UnidentifiedImageError as exc:
            raise InputImageError(f"{label} is not an image that can be read ({_sniff(fp)}).",
                                  hint=f"{_SUPPORTED_HINT} If the file was renamed, check its real type.",
                                  detail=str(exc)) from None
        except Image.DecompressionBombError as exc:
            raise _too_large(label, None, max_pixels, detail=str(exc)) from None
        except _DECODE_ERRORS as exc:  # e.g. a truncated WebP fails while its header is read
            raise _decode_error(label, exc) from None
        w, h = img.size
        if w * h > max_pixels:
            raise _too_large(label, (w, h), max_pixels)
        border = border_for(src) if isinstance(src, (str, os.PathLike)) else 0  # e.g. ObjectNet's frame
        if (max_side or draft_side) and img.format == "JPEG":
            side = min(s for s in (max_side, draft_side) if s)
            img.draft("RGB", (side, side))  # DCT-domain downscale: decode only what is needed
        try:
            img.load()
        except _DECODE_ERRORS as exc:
            raise _decode_error(label, exc) from None
        _apply_orientation(img, label)
        if border:
            img = crop_border(img, border, scale=min(img.size) / min(w, h))
        try:
            rgb = to_rgb(img)
        except (ValueError, OSError) as exc:  # an exotic colour mode PIL cannot convert
            raise InputImageError(f"{label} uses the colour mode '{img.mode}', which cannot be converted to RGB.",
                                  hint=f"Re-save the image as 8-bit RGB. {_SUPPORTED_HINT}", detail=str(exc)) from None
    finally:
        fp.close()
    return downscale(rgb, max_side) if max_side else rgb


def thumbnail(src: ImageSource, max_side: int = 256, **kw) -> Image.Image:
    """A small RGB preview (longer side `max_side`), decoded at reduced scale where the format allows."""
    return load_image(src, max_side=max_side, **kw)


def to_rgb(img: Image.Image) -> Image.Image:
    """Convert any PIL mode to 8-bit RGB: transparency on white, high bit depth scaled, CMYK via ICC."""
    mode = img.mode
    if mode == "RGB":
        return img
    if mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
        mode = img.mode
    if mode in ("RGBA", "LA", "PA", "RGBa"):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if mode.startswith("I") or mode == "F":
        return _high_depth_to_l(img).convert("RGB")
    if mode == "CMYK":
        return _cmyk_to_rgb(img)
    return img.convert("RGB")


def downscale(img: Image.Image, max_side: int) -> Image.Image:
    """Return `img` resized (aspect kept, Lanczos) so its longer side is at most `max_side`."""
    w, h = img.size
    if max(w, h) <= max_side:
        return img
    scale = max_side / max(w, h)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return img.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def to_data_url(img: Image.Image, fmt: str = "PNG", max_side: int | None = None, quality: int = 95) -> str:
    """Encode as a `data:image/...;base64,` URL (what OpenAI-compatible chat endpoints accept)."""
    fmt = fmt.upper()
    if fmt not in ("PNG", "JPEG"):
        raise ValueError(f"to_data_url supports PNG and JPEG, not {fmt!r}")
    img = to_rgb(img)
    if max_side:
        img = downscale(img, max_side)
    buf = io.BytesIO()
    if fmt == "JPEG":
        img.save(buf, "JPEG", quality=quality)
    else:
        img.save(buf, "PNG", compress_level=1)  # fast; size barely differs for photos
    return f"data:image/{fmt.lower()};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


# -- helpers -------------------------------------------------------------------------------------------

def _open_source(src: ImageSource, name: str | None) -> tuple[str, io.IOBase]:
    if isinstance(src, (bytes, bytearray, memoryview)):
        label = f"'{name}'" if name else "The image data"
        if len(src) == 0:
            raise InputImageError(f"{label} is empty (0 bytes).", hint="Choose a non-empty image file.")
        return label, io.BytesIO(bytes(src))
    if not isinstance(src, (str, os.PathLike)):
        raise TypeError(f"load_image() takes a path or bytes, not {type(src).__name__}")
    path = Path(src)
    label = f"'{name or path}'"
    return label, open_image_file(path, label)


def unreadable_reason(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be read as an image file (missing, a dangling link, a folder, a FIFO or device, no
    read permission, empty), or None when it opens. Cheap: opens and closes the file, reads nothing."""
    try:
        open_image_file(Path(path), "").close()
    except InputImageError as exc:
        return getattr(exc, "reason", exc.message)
    return None


def open_image_file(path: Path, label: str) -> io.IOBase:
    """Open a regular, non-empty, readable file, or raise InputImageError saying what the path is instead.
    Checked before open(): opening a FIFO would block until someone writes to it."""
    def fail(reason: str, hint: str, detail: str | None = None):
        err = InputImageError(f"{label} {reason}.", hint=hint, detail=detail)
        err.reason = reason
        return err

    from nemo_desktop.core.base.confine import OUTSIDE_HINT, outside_reason

    outside = outside_reason(path)  # a server's roots (nemo mcp): a member linked or listed from outside them
    if outside is not None:
        raise fail(f"is not read: {outside}", OUTSIDE_HINT)

    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise fail(f"is a link to {os.readlink(path)}, which does not exist",
                       "The file it pointed to was moved or deleted; fix or remove the link.") from None
        raise fail("does not exist", "Check the path (was the file moved?).") from None
    except PermissionError:
        raise fail("cannot be read (permission denied)", "Check the permissions of the file and its folders.") from None
    except OSError as exc:  # a link loop, a name too long, an I/O error
        raise fail(f"cannot be read ({exc.strerror or exc})", "Check the path and the disk.", repr(exc)) from None
    if stat.S_ISDIR(st.st_mode):
        raise fail("is a folder, not an image file", "Choose an image file (or drop the folder itself).")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else (
            "a socket" if stat.S_ISSOCK(st.st_mode) else "a device")
        raise fail(f"is {kind}, not an image file", "Choose a regular image file.")
    if st.st_size == 0:
        raise fail("is empty (0 bytes)",
                   "The file was probably not copied or downloaded completely; get it again.")
    try:
        return open(path, "rb")
    except PermissionError:
        raise fail("cannot be read (permission denied)", "Check the file's permissions (it needs read access).") from None
    except OSError as exc:
        raise fail(f"cannot be read ({exc.strerror or exc})", "Check the file and the disk.", repr(exc)) from None


def _open_formats() -> list[str]:
    Image.init()  # registers every plugin; AVIF/QOI only exist in newer Pillow builds
    return [f for f in ALLOWED_FORMATS if f in Image.OPEN]


def _sniff(fp) -> str:
    """A short, safe description of what the bytes look like (for the error message)."""
    fp.seek(0)
    head = fp.read(512)
    if not head:
        return "no data"
    try:
        head.decode("utf-8")
        return "it looks like a text file"
    except UnicodeDecodeError:
        return "unknown binary format"


def _too_large(label: str, size: tuple[int, int] | None, max_pixels: int, detail: str | None = None):
    dims = f" ({size[0]} x {size[1]} = {size[0] * size[1] / 1e6:.0f} megapixels)" if size else ""
    return InputImageError(
        f"{label} is too large to open safely{dims}; the limit is {max_pixels / 1e6:.0f} megapixels.",
        hint="Downscale the image (e.g. to 4096 pixels on the longer side) and try again.", detail=detail)


def _decode_error(label: str, exc: BaseException) -> InputImageError:
    text = str(exc)
    if "truncated" in text.lower() or isinstance(exc, EOFError):
        return InputImageError(f"{label} is truncated: the file ends before the image data does.",
                               hint="It was probably cut off while downloading or copying; get the file again.",
                               detail=text)
    return InputImageError(f"{label} is damaged and cannot be decoded.",
                           hint="Re-export or re-download the image.", detail=f"{type(exc).__name__}: {text}")


def _apply_orientation(img: Image.Image, label: str) -> None:
    try:
        ImageOps.exif_transpose(img, in_place=True)  # in place: no copy of a large image
    except Exception as exc:  # noqa: BLE001 - a corrupt EXIF block must not make the pixels unusable
        log.warning("Ignoring unreadable EXIF orientation in %s: %s", label, exc)


def _high_depth_to_l(img: Image.Image) -> Image.Image:
    """16-bit / 32-bit integer and float greyscale -> 8-bit L by scaling, never by clipping."""
    import numpy as np

    a = np.asarray(img)
    if img.mode.startswith("I;16"):
        lo, hi = 0.0, 65535.0
    elif img.mode == "F" and a.size and 0.0 <= float(a.min()) and float(a.max()) <= 1.0:
        lo, hi = 0.0, 1.0
    elif img.mode == "I" and a.size and 0 <= int(a.min()) and int(a.max()) <= 65535:
        lo, hi = 0.0, 65535.0  # a 16-bit file decoded into 32-bit storage
    else:  # arbitrary range (e.g. float or signed TIFF): stretch what is there
        lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 1.0)
    scaled = (a.astype(np.float64) - lo) * (255.0 / max(hi - lo, 1e-12))
    return Image.fromarray(np.clip(np.rint(scaled), 0, 255).astype(np.uint8), "L")


def _cmyk_to_rgb(img: Image.Image) -> Image.Image:
    icc = img.info.get("icc_profile")
    if icc:
        try:
            from PIL import ImageCms

            src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            return ImageCms.profileToProfile(img, src, ImageCms.createProfile("sRGB"), outputMode="RGB")
        except Exception as exc:  # noqa: BLE001 - a broken profile falls back to the plain formula
            log.debug("CMYK ICC conversion failed, using the plain formula: %s", exc)
    return img.convert("RGB")
