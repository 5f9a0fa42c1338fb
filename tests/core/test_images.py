"""load_image turns every odd file into RGB correctly, or refuses it with a clear InputImageError."""
from __future__ import annotations

import base64
import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.base.errors import InputImageError
from nemo_desktop.core.base.images import downscale, is_image_file, load_image, thumbnail, to_data_url, to_rgb


def _save(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def _noise(w=64, h=48, seed=0) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8))


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose IHDR declares width x height but carries no pixel data (a decompression-bomb header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def test_cmyk_jpeg_becomes_rgb_with_the_right_colour(tmp_path):
    path = tmp_path / "cmyk.jpg"
    Image.new("CMYK", (32, 32), (0, 255, 255, 0)).save(path, "JPEG", quality=95)  # pure red in CMYK
    img = load_image(path)
    assert img.mode == "RGB" and img.size == (32, 32)
    r, g, b = img.getpixel((16, 16))
    assert r > 230 and g < 30 and b < 30


def test_cmyk_with_unreadable_icc_profile_falls_back_to_the_formula():
    data = _save(Image.new("CMYK", (16, 16), (255, 0, 255, 0)), "JPEG", icc_profile=b"not a profile" * 10)
    assert Image.open(io.BytesIO(data)).info.get("icc_profile")  # the broken profile really is in the file
    r, g, b = load_image(data).getpixel((8, 8))
    assert g > 230 and r < 30 and b < 30  # cyan + yellow = green


def test_16bit_png_is_scaled_not_clipped(tmp_path):
    ramp = np.linspace(0, 65535, 256, dtype=np.uint16)[None, :].repeat(8, 0)
    path = tmp_path / "deep.png"
    Image.fromarray(ramp).save(path)
    assert Image.open(path).mode.startswith("I")  # really a 16-bit file
    a = np.asarray(load_image(path))
    assert a.shape == (8, 256, 3)
    assert a[0, 0, 0] == 0 and a[0, -1, 0] == 255
    assert abs(int(a[0, 128, 0]) - 128) <= 1  # mid-grey stays mid-grey (clipping would give 255)
    assert len(np.unique(a[0, :, 0])) > 200  # the full tonal range survives


@pytest.mark.parametrize("mode,values,expected", [
    ("I", np.array([[0, 1000, 65535]], dtype=np.int32), [0, 4, 255]),
    ("F", np.array([[0.0, 0.5, 1.0]], dtype=np.float32), [0, 128, 255]),
    ("F", np.array([[-2.0, 0.0, 2.0]], dtype=np.float32), [0, 128, 255]),
])
def test_other_high_depth_modes_are_scaled(mode, values, expected):
    img = Image.fromarray(values, mode) if mode == "F" else Image.fromarray(values).convert("I")
    assert img.mode == mode
    assert np.asarray(to_rgb(img))[0, :, 0].tolist() == expected


def test_palette_png_with_transparency_composites_on_white(tmp_path):
    pal = Image.new("P", (10, 10), 0)
    pal.putpalette([0, 0, 0, 200, 0, 0] + [0] * (256 * 3 - 6))  # index 0 black (transparent), 1 red
    pal.paste(1, (0, 0, 5, 10))
    path = tmp_path / "pal.png"
    pal.save(path, transparency=0)
    img = load_image(path)
    assert img.mode == "RGB"
    assert img.getpixel((2, 5)) == (200, 0, 0)
    assert img.getpixel((8, 5)) == (255, 255, 255)  # transparent -> white, not black


@pytest.mark.parametrize("mode,colour,expected", [
    ("RGBA", (0, 0, 255, 128), (127, 127, 255)),
    ("LA", (0, 0), (255, 255, 255)),
])
def test_alpha_is_composited_on_white(mode, colour, expected):
    img = load_image(_save(Image.new(mode, (4, 4), colour), "PNG"))
    assert img.mode == "RGB"
    assert all(abs(a - b) <= 1 for a, b in zip(img.getpixel((1, 1)), expected))


def test_exif_orientation_6_swaps_width_and_height(tmp_path):
    stored = Image.new("RGB", (40, 20), (255, 0, 0))
    stored.paste((0, 0, 255), (20, 0, 40, 20))  # left half red, right half blue as stored
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    path = tmp_path / "rotated.jpg"
    stored.save(path, "JPEG", exif=exif, quality=95)
    img = load_image(path)
    assert img.size == (20, 40)
    top, bottom = img.getpixel((10, 5)), img.getpixel((10, 35))
    assert top[0] > 200 and top[2] < 60  # the stored left (red) side is now on top
    assert bottom[2] > 200 and bottom[0] < 60


def test_decompression_bomb_header_is_refused_before_decoding(tmp_path):
    path = tmp_path / "bomb.png"
    path.write_bytes(_png_header_only(9000, 9000))  # 81 MP: above our 64 MP limit, below PIL's own
    with pytest.raises(InputImageError) as err:
        load_image(path)
    assert "bomb.png" in err.value.message and "too large" in err.value.message and "9000 x 9000" in err.value.message
    assert err.value.hint


def test_header_beyond_pils_own_limit_is_a_clear_error_too():
    with pytest.raises(InputImageError, match="too large"):
        load_image(_png_header_only(100_000, 100_000), name="huge.png")


def test_max_pixels_is_configurable():
    data = _save(_noise(100, 100), "PNG")
    with pytest.raises(InputImageError, match="too large"):
        load_image(data, max_pixels=5_000)
    assert load_image(data, max_pixels=10_000).size == (100, 100)


@pytest.mark.parametrize("fmt,suffix", [("JPEG", "jpg"), ("PNG", "png"), ("WEBP", "webp")])
def test_truncated_files_are_refused_not_half_loaded(tmp_path, fmt, suffix):
    data = _save(_noise(128, 128), fmt)
    path = tmp_path / f"cut.{suffix}"
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(InputImageError) as err:
        load_image(path)
    assert f"cut.{suffix}" in err.value.message
    assert "truncated" in err.value.message or "damaged" in err.value.message
    assert err.value.hint


def test_truncated_jpeg_says_truncated():
    data = _save(_noise(128, 128), "JPEG")
    with pytest.raises(InputImageError, match="truncated"):
        load_image(data[:-200], name="photo.jpg")


def test_zero_bytes(tmp_path):
    path = tmp_path / "empty.jpg"
    path.write_bytes(b"")
    with pytest.raises(InputImageError, match=r"empty\.jpg.*empty \(0 bytes\)"):
        load_image(path)
    with pytest.raises(InputImageError, match="empty"):
        load_image(b"")


def test_text_file_named_jpg_names_the_file_and_what_to_do(tmp_path):
    path = tmp_path / "notes.jpg"
    path.write_text("these are my notes, not a photo\n")
    with pytest.raises(InputImageError) as err:
        load_image(path)
    assert "notes.jpg" in err.value.message and "not an image" in err.value.message
    assert "text file" in err.value.message
    assert "JPEG" in err.value.hint


def test_postscript_is_refused_even_though_pil_could_open_it(tmp_path):
    path = tmp_path / "figure.eps"
    path.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n")
    with pytest.raises(InputImageError, match="not an image"):
        load_image(path)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(InputImageError, match="does not exist"):
        load_image(tmp_path / "nope.png")
    with pytest.raises(InputImageError, match="folder"):
        load_image(tmp_path)


def test_pixels_round_trip_exactly_for_lossless_rgb(tmp_path):
    src = _noise()
    path = tmp_path / "x.png"
    src.save(path)
    assert np.array_equal(np.asarray(load_image(path)), np.asarray(src))
    assert np.array_equal(np.asarray(load_image(path.read_bytes())), np.asarray(src))


def test_max_side_downscales_and_thumbnail(tmp_path):
    path = tmp_path / "big.jpg"
    _noise(1000, 600).save(path, "JPEG")
    assert load_image(path, max_side=250).size == (250, 150)
    assert thumbnail(path, 100).size == (100, 60)
    small = _noise(50, 40)
    assert downscale(small, 100) is small
    assert downscale(small, 25).size == (25, 20)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_data_url_round_trip(fmt):
    url = to_data_url(_noise(80, 60).convert("RGBA"), fmt, max_side=40)
    head, b64 = url.split(",", 1)
    assert head == f"data:image/{fmt.lower()};base64"
    img = Image.open(io.BytesIO(base64.b64decode(b64)))
    assert img.format == fmt and img.size == (40, 30) and img.mode == "RGB"


def test_is_image_file():
    assert is_image_file("a/b/photo.JPG") and is_image_file("x.webp") and is_image_file("scan.tiff")
    assert not is_image_file("notes.txt") and not is_image_file("model.safetensors") and not is_image_file("jpg")
