"""Render a ReportDocument as one self-contained, script-free HTML file.

Safe to open from an e-mail or a bug tracker: images are `data:` URIs, the CSS is inline, nothing is
fetched, and a Content-Security-Policy meta forbids scripts and every external load should an escaping bug
ever slip through. Every string from the model (model output, labels, file names) goes through
`html.escape(quote=True)`; the only links are in-page `#anchor`s whose ids the builder made itself.
Long unbroken words wrap (`overflow-wrap: anywhere`) and text blocks carry `dir="auto"` so right-to-left
text reads in its own direction. The print style sheet starts each sample on a new page and keeps figures
and table rows whole.
"""
from __future__ import annotations

import base64
import html
import re

from .model import (BeforeAfter, Changes, Figures, Highlighted, Histogram, Index, KeyValues, Paragraph,
                    ReportDocument, ReportImage, Section, Table)
from .svg_charts import chart_html

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
PALETTE = ["#2f6db5", "#d9822b", "#3a9a5b", "#b8453f", "#7d5ba6", "#8a6d3b", "#c45a9b", "#5f6b77"]
_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]")

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Noto Sans", Arial, sans-serif;
       color: #1d2329; background: #fff; margin: 0 auto; max-width: 1100px; padding: 24px 32px 64px;
       overflow-wrap: anywhere; word-break: break-word; }
h1 { font-size: 1.7em; margin: 0 0 4px; }
h2 { font-size: 1.35em; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid #d5dbe1; }
h3 { font-size: 1.15em; margin: 24px 0 8px; }
h4, h5 { font-size: 1em; margin: 18px 0 6px; }
.subtitle { color: #4a5561; margin: 0; }
.meta { color: #6b7682; font-size: 0.85em; margin: 4px 0 0; }
.t { white-space: pre-wrap; }
p { margin: 8px 0; }
p.callout { background: #eef4fb; border-left: 4px solid #2f6db5; padding: 10px 14px; font-size: 1.05em; }
p.muted { color: #5d6873; font-size: 0.92em; }
p.warning { background: #fff5e6; border-left: 4px solid #d9822b; padding: 6px 12px; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 14px; table-layout: fixed; }
th, td { border: 1px solid #d5dbe1; padding: 4px 8px; vertical-align: top; text-align: left; }
thead th { background: #f1f4f7; overflow-wrap: normal; word-break: keep-all; hyphens: manual; }
table.words { table-layout: auto; }
caption { caption-side: bottom; text-align: left; color: #5d6873; font-size: 0.85em; padding-top: 4px; }
table.kv th { width: 26%; background: #f7f9fa; font-weight: 600; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; }
td.c, th.c { text-align: center; }
td img { max-width: 100%; height: auto; display: block; margin: 0 auto; }
table.figs { width: auto; table-layout: auto; border-collapse: separate; border-spacing: 0; margin: 8px 0 12px; }
table.figs td { border: none; padding: 0 16px 8px 0; }
table.figs img { max-width: 100%; height: auto; border: 1px solid #d5dbe1; display: block; margin: 0; }
.figcaption { font-size: 0.88em; color: #4a5561; margin-top: 4px; }
img.px { image-rendering: crisp-edges; image-rendering: pixelated; }
.pxnote { font-size: 0.8em; color: #5d6873; text-align: center; }
nav ol { columns: 2; padding-left: 1.4em; }
a { color: #2f6db5; text-decoration: none; }
svg { max-width: 100%; height: auto; }
svg text { font-family: inherit; }
section.sample { border-top: 3px solid #2f6db5; margin-top: 48px; }
@media print {
  body { max-width: none; padding: 0; font-size: 10.5pt; }
  @page { size: A4; margin: 14mm 12mm 16mm; }
  section.sample { break-before: page; border-top: none; margin-top: 0; }
  h2, h3, h4 { break-after: avoid; }
  tr, svg, p.callout { break-inside: avoid; }
  thead { display: table-header-group; }
  table { font-size: 8.5pt; }
  a { color: inherit; }
  nav ol { columns: 2; }
}
"""


def _e(s: object) -> str:
    return html.escape("" if s is None else str(s), quote=True)


def _id(anchor: str) -> str:
    return _SAFE_ID.sub("-", anchor)


def _img(im: ReportImage, max_w: int | None = None) -> str:
    data = base64.b64encode(im.data).decode("ascii")
    mime = im.mime if im.mime in ("image/png", "image/jpeg") else "image/png"
    w, h = im.width, im.height
    if max_w and w > max_w:
        w, h = max_w, max(1, round(im.height * max_w / im.width))
    # An enlarged small image keeps its pixels square should the browser scale it again.
    px = ' class="px"' if im.upscale > 1 else ""
    return (f'<img src="data:{mime};base64,{data}"{px} width="{w}" height="{h}" '
            f'alt="{_e(im.alt or im.caption)}">')


def _paragraph(b: Paragraph) -> str:
    return f'<p class="t {_e(b.style)}" dir="auto">{_e(b.text)}</p>'


def _kv(b: KeyValues) -> str:
    rows = "".join(f'<tr><th dir="auto">{_e(k)}</th><td class="t" dir="auto">{_e(v)}</td></tr>' for k, v in b.rows)
    return f'<table class="kv"><tbody>{rows}</tbody></table>'


def _colgroup(widths: list[float] | None) -> str:
    if not widths:
        return ""
    total = sum(widths)
    return "<colgroup>" + "".join(f'<col style="width:{100 * w / total:.1f}%">' for w in widths) + "</colgroup>"


def _table(b: Table) -> str:
    align = b.align or ["l"] * len(b.header)
    cls = lambda i: f' class="{align[i]}"' if i < len(align) and align[i] != "l" else ""  # noqa: E731
    head = "".join(f'<th{cls(i)} dir="auto">{_e(h)}</th>' for i, h in enumerate(b.header))
    body = []
    for row in b.rows:
        cells = []
        for i, c in enumerate(row):
            if isinstance(c, ReportImage):
                note = f'<div class="pxnote">{_e(c.size_note)}</div>' if c.size_note else ""
                cells.append(f"<td{cls(i)}>{_img(c, 160)}{note}</td>")
            else:
                cells.append(f'<td{cls(i)}><span class="t" dir="auto">{_e(c)}</span></td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = f'<caption dir="auto">{_e(b.caption)}</caption>' if b.caption else ""
    # Columns are at least as wide as their header's longest word (a header never breaks mid-word); the
    # widths are the proportions of the rest. Cells still wrap anywhere (long paths, hashes).
    return f"<table class=\"words\">{cap}{_colgroup(b.widths)}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


FIGURE_PX = 480  # widest a figure is shown (the competency charts are 420 and 480 px: never shrunk)
FIGURES_PER_ROW, FIGURES_ROW_PX = 3, 800  # a row of figures stays readable in the app's result view


def _figure_rows(images: list[ReportImage]) -> list[list[ReportImage]]:
    rows: list[list[ReportImage]] = []
    used = 0
    for im in images:
        w = min(im.width, FIGURE_PX)
        if not rows or len(rows[-1]) >= FIGURES_PER_ROW or used + w > FIGURES_ROW_PX:
            rows.append([])
            used = 0
        rows[-1].append(im)
        used += w + 16
    return rows


def _figures(b: Figures) -> str:
    """Images with their captions under them, in rows of a table: the app shows reports with Qt's rich text,
    which has no flex layout and draws <figure>/<figcaption> inline, so a caption flowed beside its image."""
    rows = []
    for row in _figure_rows(list(b.images)):
        cells = []
        for im in row:
            w = min(im.width, FIGURE_PX)
            cells.append(f'<td width="{w}" style="width:{w}px">{_img(im, FIGURE_PX)}'
                         f'<div class="figcaption" dir="auto">{_e(im.caption)}</div></td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f'<p class="muted" dir="auto">{_e(b.caption)}</p>' if b.caption else ""
    return f'<table class="figs"><tbody>{"".join(rows)}</tbody></table>{cap}'


def _index(b: Index) -> str:
    head = "".join(f'<th dir="auto">{_e(h)}</th>' for h in b.header)
    rows = []
    for r in b.rows:
        first, rest = (r.cells[0], r.cells[1:]) if r.cells else ("", [])
        cells = [f'<td><a href="#{_id(r.anchor)}">{_e(first)}</a></td>']
        cells += [f'<td dir="auto">{_e(c)}</td>' for c in rest]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    n = len(b.header)
    widths = [0.6, 3, 2.2, 2.2] + [1.6] * (n - 4) if n >= 4 else None
    return (f'<table class="index">{_colgroup(widths)}<thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def histogram_svg(b: Histogram, width: int = 720) -> str:
    """Small multiples: one bar row per series on a shared CEI axis, the mean as a dashed line."""
    left, right, row_h, top, axis_h = 150, 16, 84, 8, 34
    plot_w = width - left - right
    height = top + row_h * len(b.series) + axis_h
    lo, hi = b.edges[0], b.edges[-1]
    x = lambda v: left + (v - lo) / (hi - lo) * plot_w  # noqa: E731
    peak = max((max(s.counts) for s in b.series if s.counts), default=1) or 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" role="img" aria-label="{_e(b.title)}"><title>{_e(b.title)}</title>']
    for i, s in enumerate(b.series):
        color = PALETTE[i % len(PALETTE)]
        y0 = top + i * row_h
        base = y0 + row_h - 10
        parts.append(f'<text x="{left - 10}" y="{y0 + 30}" text-anchor="end" font-size="13" '
                     f'font-weight="600">{_e(s.label[:40])}</text>')
        mean = b.mean_text(s)
        parts.append(f'<text x="{left - 10}" y="{y0 + 48}" text-anchor="end" font-size="11" fill="#5d6873">'
                     f'n = {s.n}, {mean}</text>')
        parts.append(f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="#9aa5b1"/>')
        for k, c in enumerate(s.counts):
            if not c:
                continue
            h = (row_h - 22) * c / peak
            x0, x1 = x(b.edges[k]), x(b.edges[k + 1])
            parts.append(f'<rect x="{x0 + 1:.1f}" y="{base - h:.1f}" width="{max(0.5, x1 - x0 - 2):.1f}" '
                         f'height="{h:.1f}" fill="{color}"><title>{c} in [{b.edges[k]:g}, '
                         f'{b.edges[k + 1]:g})</title></rect>')
        if s.mean is not None:
            parts.append(f'<line x1="{x(s.mean):.1f}" y1="{y0 + 6}" x2="{x(s.mean):.1f}" y2="{base}" '
                         'stroke="#1d2329" stroke-dasharray="4 3"/>')
    if lo < 0 < hi:
        parts.append(f'<line x1="{x(0):.1f}" y1="{top}" x2="{x(0):.1f}" y2="{top + row_h * len(b.series) - 10}"'
                     ' stroke="#b8453f" stroke-width="1"/>')
    axis_y = top + row_h * len(b.series) - 10
    step = max(1, len(b.edges) // 10)
    for k in range(0, len(b.edges), step):
        parts.append(f'<text x="{x(b.edges[k]):.1f}" y="{axis_y + 16}" text-anchor="middle" font-size="11">'
                     f'{b.edges[k]:g}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{axis_y + 32}" text-anchor="middle" font-size="12" '
                 f'fill="#4a5561">{_e(b.x_label)}</text></svg>')
    return "".join(parts)


def _shade(w: float) -> str:
    """Amber blended into white by w (a solid colour: Qt's rich text, which shows reports in the app, has no alpha)."""
    w = max(0.0, min(1.0, float(w)))
    return "#" + "".join(f"{round(255 - (255 - c) * w):02x}" for c in (255, 176, 0))


def _highlighted(b: Highlighted) -> str:
    spans = " ".join(f'<span class="hl" style="background-color:{_shade(w)}" title="{w:.2f}">{_e(u)}</span>'
                     for u, w in zip(b.units, b.weights))
    cap = f'<p class="t muted" dir="auto">{_e(b.caption)}</p>' if b.caption else ""
    return f'<p class="t hl" dir="auto">{spans}</p>{cap}'


def _block(b) -> str:
    if isinstance(b, Paragraph):
        return _paragraph(b)
    if isinstance(b, Highlighted):
        return _highlighted(b)
    if isinstance(b, KeyValues):
        return _kv(b)
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Figures):
        return _figures(b)
    if isinstance(b, Histogram):
        return f"<div>{histogram_svg(b)}</div>"
    if isinstance(b, Index):
        return _index(b)
    if isinstance(b, (BeforeAfter, Changes)):
        return chart_html(b)
    raise TypeError(f"unknown report block {type(b).__name__}")


def _section(s: Section, depth: int) -> str:
    level = min(2 + depth, 5)
    cls = ' class="sample"' if s.new_page else ""
    anchor = f' id="{_id(s.anchor)}"' if s.anchor else ""
    inner = "".join(_block(b) for b in s.blocks) + "".join(_section(c, depth + 1) for c in s.children)
    return f'<section{cls}{anchor}><h{level} dir="auto">{_e(s.title)}</h{level}>{inner}</section>'


def render_html(doc: ReportDocument) -> str:
    meta = " \u00b7 ".join(f"{_e(k)}: {_e(v)}" for k, v in doc.meta)
    toc = ""
    if doc.kind == "run":
        items = "".join(f'<li><a href="#{_id(s.anchor)}">{_e(s.title)}</a></li>'
                        for s in doc.sections if s.anchor and not s.new_page)
        toc = f"<nav><h2>Contents</h2><ol>{items}</ol></nav>"
    body = "".join(_section(s, 0) for s in doc.sections)
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="referrer" content="no-referrer">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(doc.title)}</title><style>{CSS}</style></head><body>"
            f'<header><h1 dir="auto">{_e(doc.title)}</h1><p class="subtitle" dir="auto">{_e(doc.subtitle)}</p>'
            f'<p class="meta">Generated {_e(doc.generated_at)} \u00b7 {meta}</p></header>'
            f"{toc}{body}</body></html>\n")


__all__ = ["render_html", "histogram_svg", "CSP"]
