"""Small images are readable in reports (issue 19): a 16x16 input is embedded at 128 px with nearest neighbour
(uniform 8x8 blocks equal to the source pixels), as PNG even in a JPEG report, shown pixelated in HTML, and its
caption says its real size; the PDF embeds the same enlarged pixels."""
from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.reports import build_run_report, build_single_report, render_html, render_pdf
from nemo_desktop.core.reports.images import ImageCache, image_from_file, upscale_factor
from report_fixtures import make_result, make_run, store_result

SMALL = 16


def tiny_picture(seed: int = 0) -> Image.Image:
    """16x16 pixels of random colours: any smoothing or block misalignment changes some of them."""
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (SMALL, SMALL, 3), dtype=np.uint8), "RGB")


def assert_nearest_blocks(im: Image.Image, source: Image.Image) -> None:
    factor = im.width // source.width
    arr, src = np.asarray(im.convert("RGB")), np.asarray(source.convert("RGB"))
    assert im.size == (source.width * factor, source.height * factor)
    blocks = arr.reshape(source.height, factor, source.width, factor, 3)
    assert (blocks == blocks[:, :1, :, :1]).all(), "a block is not one uniform colour"
    assert (blocks[:, 0, :, 0] == src).all(), "a block's colour is not its source pixel"


@pytest.mark.parametrize(("longest", "max_side", "factor"),
                         [(16, 384, 8), (32, 384, 4), (64, 160, 2), (65, 384, 1), (96, 384, 1), (200, 384, 1),
                          (16, 100, 6)])
def test_upscale_factor(longest, max_side, factor):
    assert upscale_factor(longest, max_side) == factor


def test_a_small_file_is_enlarged_with_nearest_neighbour_and_kept_png(tmp_path):
    source = tiny_picture()
    path = tmp_path / "tiny.png"
    source.save(path)
    for fmt in ("png", "jpeg"):
        got = image_from_file(path, 384, fmt)
        assert got.mime == "image/png" and got.upscale == 8 and (got.width, got.height) == (128, 128)
        assert_nearest_blocks(Image.open(io.BytesIO(got.data)), source)
        assert got.source_size == (16, 16) and got.with_text("Input").caption == "Input (16\u00d716 px, shown \u00d78)"
    big = tmp_path / "big.png"
    Image.new("RGB", (200, 100), (1, 2, 3)).save(big)
    assert image_from_file(big, 384).upscale == 1 and image_from_file(big, 384).with_text("Input").caption == "Input"
    assert ImageCache("jpeg").load(big, 384).mime == "image/jpeg"


def tiny_result(store):
    r, arts = make_result(1, "scitx")
    arts["input"] = tiny_picture(1)
    arts["obs0"] = tiny_picture(2)
    return r, arts, store_result(store, r, arts)


def test_single_report_embeds_a_16px_input_at_128px_pixelated_with_its_size_in_the_caption(store):
    _r, arts, key = tiny_result(store)
    doc = build_single_report(key, store)
    inputs = [im for im in doc.iter_images() if im.caption.startswith("Input image")]
    assert len(inputs) == 1
    shown = inputs[0]
    assert shown.width >= 128 and "16\u00d716" in shown.caption
    assert_nearest_blocks(Image.open(io.BytesIO(shown.data)), arts["input"])

    html = render_html(doc)
    figure = re.search(r'<td[^>]*><img src="data:image/png;base64,([^"]+)" class="px" width="(\d+)" height="(\d+)" '
                       r'alt="Input image[^"]*"><div class="figcaption" dir="auto">([^<]*)</div>', html)
    assert figure, "the input figure is not an enlarged, pixelated PNG"
    assert int(figure.group(2)) >= 128 and figure.group(4) == "Input image (16\u00d716 px, shown \u00d78)"
    assert_nearest_blocks(Image.open(io.BytesIO(base64.b64decode(figure.group(1)))), arts["input"])
    assert "image-rendering: pixelated" in html
    # The 16-px reference thumbnail in a table says its size under the image (table cells have no caption).
    assert '<div class="pxnote">16\u00d716 px, shown \u00d78</div>' in html


def test_a_jpeg_run_report_keeps_enlarged_small_images_png(store):
    run_id = make_run(store, n_samples=1, methods=("scitx",))
    doc = build_run_report(run_id, store)  # JPEG by default; the fixtures' 64-px references are small
    small = [im for im in doc.iter_images() if im.upscale > 1]
    assert small and all(im.mime == "image/png" and "64\u00d764 px" in im.alt for im in small)
    assert all(im.mime == "image/jpeg" for im in doc.iter_images() if im.upscale == 1)


def test_the_pdf_embeds_the_enlarged_pixels(store, tmp_path):
    _r, arts, key = tiny_result(store)
    pdf = render_pdf(build_single_report(key, store))
    xobjects = re.findall(rb"/Height (\d+)\n/Length \d+\n/Subtype /Image\n/Type /XObject\n/Width (\d+)", pdf)
    assert (b"128", b"128") in xobjects  # the 16-px input and reference, embedded enlarged
    if not (shutil.which("pdfimages") and shutil.which("pdftotext")):
        pytest.skip("pdfimages/pdftotext (Debian poppler-utils) missing: embedded pixels not extracted")
    path = tmp_path / "r.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    text = " ".join(text.split())  # captions wrap in narrow figures
    assert "Input image (16\u00d716 px, shown \u00d78)" in text  # the figure's caption
    assert text.count("16\u00d716 px, shown \u00d78") >= 2  # and the reference thumbnail's cell
    subprocess.run(["pdfimages", "-png", str(path), str(tmp_path / "img")], check=True, timeout=60)
    extracted = [Image.open(p) for p in sorted(tmp_path.glob("img-*.png"))]
    matching = [im for im in extracted if im.size == (128, 128)
                and (np.asarray(im.convert("RGB"))[::8, ::8] == np.asarray(arts["input"])).all()]
    assert matching, "the 16-px input is not in the PDF as 128-px nearest-neighbour pixels"
    assert_nearest_blocks(matching[0], arts["input"])
