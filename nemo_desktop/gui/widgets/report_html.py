"""Report HTML in the app's rich-text views, charts included.

The reports embed their charts as inline `<svg>` (the HTML export and the browser draw them), but Qt's rich
text has no SVG: a QTextBrowser drops the tags and runs the chart's labels together as text. `set_report_html`
is the one way the app shows report HTML: each inline `<svg>` is drawn by QtSvg into an image at the view's
device pixel ratio, registered as an image resource of the document and replaced by an `<img>` of the same
size (shrunk to the view's width when wider), so the chart is a picture, and a click on it opens it zoomable
(text_images.py reads the document's resources).
"""
from __future__ import annotations

import hashlib
import html
import re

from PySide6.QtCore import QByteArray, QRectF, QUrl
from PySide6.QtGui import QColor, QImage, QPainter, QTextDocument
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QTextEdit

_SVG = re.compile(r"<svg\b.*?</svg>", re.S | re.I)
_LABEL = re.compile(r'\baria-label="([^"]*)"')
SCHEME = "nemo-chart"
_MARGIN = 24  # the document's margins and the vertical scroll bar: a chart shrunk to fit needs no sideways scroll


def render_svg(svg: str, dpr: float = 1.0, max_width: int | None = None) -> tuple[QImage, int, int] | None:
    """The SVG drawn on white at its own size (or shrunk to `max_width`), with `dpr` device pixels per pixel;
    returns (image, shown width, shown height), or None when QtSvg cannot read it."""
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    size = renderer.defaultSize()
    if not renderer.isValid() or size.isEmpty():
        return None
    w, h = size.width(), size.height()
    if max_width and w > max_width:
        w, h = max_width, max(1, round(h * max_width / w))
    image = QImage(max(1, round(w * dpr)), max(1, round(h * dpr)), QImage.Format.Format_ARGB32_Premultiplied)
    image.setDevicePixelRatio(dpr)
    image.fill(QColor("white"))  # the report's background, also on a dark palette
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    renderer.render(painter, QRectF(0, 0, w, h))
    painter.end()
    return image, w, h


def charts_as_images(text: str, dpr: float = 1.0, max_width: int | None = None
                     ) -> tuple[str, list[tuple[QUrl, QImage]]]:
    """`text` with every inline <svg> replaced by an <img> of a `nemo-chart:` resource, and those resources."""
    resources: list[tuple[QUrl, QImage]] = []

    def swap(m: re.Match) -> str:
        svg = m.group(0)
        label = _LABEL.search(svg[:svg.find(">") + 1])
        alt = html.unescape(label.group(1)) if label else "chart"
        drawn = render_svg(svg, dpr, max_width)
        if drawn is None:
            return (f'<p class="warning">{html.escape(alt)}: this chart could not be drawn here (see the HTML '
                    'export).</p>')
        image, w, h = drawn
        url = QUrl(f"{SCHEME}:{hashlib.sha1(svg.encode('utf-8')).hexdigest()[:16]}-{w}.png")
        resources.append((url, image))
        return f'<img src="{url.toString()}" width="{w}" height="{h}" alt="{html.escape(alt, quote=True)}">'

    return _SVG.sub(swap, text), resources


# In the app's result views, table cells are padded less than in the exported page: at 1280×800 the competency-bench
# table's last columns (KD, s / image) were off-screen. Qt applies the later of two equal rules.
COMPACT_CELLS = "<style>th, td { padding: 3px 4px; }</style>"


def compact_tables(text: str) -> str:
    """The report HTML with COMPACT_CELLS after its own style sheet."""
    at = text.lower().find("</head>")
    return text[:at] + COMPACT_CELLS + text[at:] if at >= 0 else COMPACT_CELLS + text


_LONG_TOKEN = re.compile(r"[^\s<>&]{%d,}" % 28)
_TEXT_NODE = re.compile(r">([^<]+)<")
ZWSP = "\u200b"


def breakable_long_words(body: str) -> str:
    """Text nodes of `body` with a zero-width space every 16 characters of a word longer than 27 (a revision's
    sha256, a dataset fingerprint): the view wraps only between words (keep_words_whole), so such a value pushed
    its table past the view's edge (the competency estimator's values were cut at 1280×800). Tags, attributes
    and entities are left alone."""
    def split(match: re.Match) -> str:
        word = match.group(0)
        return ZWSP.join(word[i:i + 16] for i in range(0, len(word), 16))

    start = body.lower().find("<body")
    head, rest = (body[:start], body[start:]) if start >= 0 else ("", body)
    return head + _TEXT_NODE.sub(lambda m: ">" + _LONG_TOKEN.sub(split, m.group(1)) + "<", rest)


def set_report_html(view: QTextEdit, text: str) -> None:
    """Show report HTML in `view` (a QTextBrowser/QTextEdit) with its charts as pictures and compact cells."""
    text = compact_tables(text)
    width = view.viewport().width() - _MARGIN if view.isVisible() else None
    body, resources = charts_as_images(text, view.devicePixelRatioF(),
                                       width if width and width > 200 else None)
    view.setHtml(breakable_long_words(body))  # clears the document's resources: they are added after it
    doc = view.document()
    for url, image in resources:
        doc.addResource(QTextDocument.ResourceType.ImageResource.value, url, image)
    if resources:
        doc.markContentsDirty(0, doc.characterCount())
