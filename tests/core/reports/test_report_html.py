"""The HTML report, parsed with the standard library: complete, script-free, self-contained, escaped."""
from __future__ import annotations

import base64
import binascii
import io
import re
from html.parser import HTMLParser

import pytest
from PIL import Image

from nemo_desktop.core.reports import build_run_report, build_single_report, render_html
from nemo_desktop.core.reports.html import CSP
from report_fixtures import (ARABIC, EMOJI, HEBREW, HOSTILE, IMG_ONERROR, JS_LINK, LONG_WORD, QUOTE_BREAK, SCRIPT,
                             make_result, make_run, store_result)


class Collector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.style += data
        else:
            self.text.append(data)

    def all(self, tag):
        return [a for t, a in self.tags if t == tag]


def parse(html: str) -> Collector:
    c = Collector()
    c.feed(html)
    c.close()
    return c


def assert_safe(html: str, doc) -> Collector:
    c = parse(html)
    names = {t for t, _ in c.tags}
    assert not names & {"script", "iframe", "object", "embed", "base", "form", "link", "frame", "meta refresh"}
    for tag, attrs in c.tags:
        for name, value in attrs.items():
            assert not name.lower().startswith("on"), (tag, name)
            assert "javascript:" not in (value or "").lower().replace(" ", ""), (tag, name, value)
    for a in c.all("a"):
        assert set(a) == {"href"} and re.fullmatch(r"#[A-Za-z0-9_-]+", a["href"]), a
    ids = {a["id"] for _, a in c.tags if "id" in a}
    assert all(a["href"][1:] in ids for a in c.all("a")), "an in-page link points nowhere"
    # Every image embedded, as a PNG that decodes, and exactly as many as the model holds.
    imgs = c.all("img")
    assert len(imgs) == len(list(doc.iter_images()))
    formats = set()
    for a in imgs:
        m = re.fullmatch(r"data:image/(png|jpeg);base64,(.+)", a["src"], re.S)
        assert m, a["src"][:40]
        try:
            data = base64.b64decode(m.group(2), validate=True)
        except binascii.Error:
            pytest.fail("image data is not valid base64")
        im = Image.open(io.BytesIO(data))
        im.load()
        assert im.format == m.group(1).upper() and int(a["width"]) <= im.width and a.get("alt") is not None
        formats.add(im.format)
    c.image_formats = formats
    # Nothing is fetched from anywhere: no external src/href, no url() in CSS, CSP forbids scripts.
    for _, attrs in c.tags:
        for k in ("src", "href", "action", "poster", "srcset", "data"):
            v = attrs.get(k)
            assert v is None or v.startswith(("data:image/png;base64,", "data:image/jpeg;base64,", "#")), (k, v)
    assert "url(" not in c.style and "@import" not in c.style
    csp = [m for m in c.all("meta") if m.get("http-equiv", "").lower() == "content-security-policy"]
    assert len(csp) == 1 and csp[0]["content"] == CSP
    assert "default-src 'none'" in CSP and "script-src" not in CSP and "img-src data:" in CSP
    return c


def test_single_hostile_report_is_harmless_and_readable(store):
    r, arts = make_result(1, "scitx", hostile=True)
    doc = build_single_report(store_result(store, r, arts), store)
    html = render_html(doc)
    c = assert_safe(html, doc)
    text = "".join(c.text)
    for s in HOSTILE:  # shown to the reader as text, character for character
        assert s in text, s[:40]
    assert html.count("<script") == 0 and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&quot; onmouseover=&quot;alert(1)&quot;" in html  # the quote cannot leave an attribute
    assert "overflow-wrap: anywhere" in c.style and "@media print" in c.style
    # Right-to-left and emoji text sit in blocks that pick their own direction.
    rtl_blocks = [a for t, a in c.tags if t in ("p", "span", "td", "h1", "div") and a.get("dir") == "auto"]
    assert rtl_blocks
    for s in (ARABIC, HEBREW, EMOJI, LONG_WORD, IMG_ONERROR, JS_LINK, QUOTE_BREAK, SCRIPT):
        assert s in text
    # The hostile file name lands in alt attributes as plain attribute text.
    assert any(QUOTE_BREAK in (a.get("alt") or "") for a in c.all("img"))


def test_single_report_structure(store):
    r, arts = make_result(2, "scitx")
    doc = build_single_report(store_result(store, r, arts), store)
    c = assert_safe(render_html(doc), doc)
    assert [a for t, a in c.tags if t == "html"][0].get("lang") == "en"
    assert len(c.all("img")) == 2 + 2 * 3 + 5
    assert c.image_formats == {"PNG"}  # a diagnosis keeps lossless images
    text = "".join(c.text)
    for needle in ("Grad-CAM overlay", "Set A: true class", "Set B: predicted class", "Set C: random",
                   "Reproducibility manifest", "abc123", "scitx-hypothesis/1", "P(true) before"):
        assert needle in text


def test_run_report_html(store):
    run_id = make_run(store, n_samples=5, methods=("scitx", "cam-mllm"), hostile=True)
    doc = build_run_report(run_id, store)
    html = render_html(doc)
    c = assert_safe(html, doc)
    sections = [a for t, a in c.tags if t == "section" and a.get("class") == "sample"]
    assert len(sections) == 5
    assert len(c.all("svg")) == 1 and len(c.all("rect")) >= 2
    index_links = [a["href"] for a in c.all("a") if a["href"].startswith("#sample-")]
    assert sorted(set(index_links)) == [f"#sample-{i}" for i in range(1, 6)]
    text = "".join(c.text)
    assert "LLM Match" in text and "Renditions (sketches, cartoons)" in text and SCRIPT in text
    # Run reports default to JPEG to stay small; the 64-px reference thumbnails are enlarged x2 with nearest
    # neighbour and stay PNG (JPEG would smear their square pixels), and they say so.
    assert c.image_formats == {"JPEG", "PNG"}
    enlarged = [a for a in c.all("img") if a.get("class") == "px"]
    assert enlarged and all(a["src"].startswith("data:image/png") and "64\u00d764 px, shown \u00d72" in a["alt"]
                            for a in enlarged)
    assert all(a["src"].startswith("data:image/jpeg") for a in c.all("img") if a.get("class") != "px")


def test_run_report_html_with_png_images(store):
    run_id = make_run(store, n_samples=2, methods=("scitx",))
    doc = build_run_report(run_id, store, image_format="png")
    c = assert_safe(render_html(doc), doc)
    assert c.image_formats == {"PNG"} and len(c.all("img")) == 2 * (1 + 1 + 3 + 5)
