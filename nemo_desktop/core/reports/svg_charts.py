"""Inline SVG of the interval charts (BeforeAfter, Changes), drawn like the CEI histogram (html.histogram_svg):
plain shapes and text, every label escaped, every number also in a <title> that names its interval and n.
Horizontal rows, one per set or class, so that long class names fit on the left. The PDF draws the same SVG
(pdf_charts.py) with its own font, without the <title>s, which fpdf2 does not read, and with the row labels (class
names: any script) written by the PDF's own text engine, whose fallback fonts and shaping fpdf2's SVG text lacks."""
from __future__ import annotations

import html
import math

from .document import BeforeAfter, Changes

BEFORE, AFTER, GOOD, BAD, FLAG, AXIS, INK, MUTED = ("#9aa5b1", "#2f6db5", "#3a9a5b", "#d9822b", "#b8453f", "#9aa5b1",
                                                    "#1d2329", "#5d6873")
LEFT, RIGHT, TOP = 220, 86, 30
ROW_H = {BeforeAfter: 58, Changes: 40}  # one row's height per chart
LABEL_DY = {BeforeAfter: 20, Changes: 14}  # the row label's baseline below the row's top


def _e(s: object) -> str:
    return html.escape("" if s is None else str(s), quote=True)


def _open(width: int, height: int, title: str, font: str | None) -> list[str]:
    family = f' font-family="{_e(font)}"' if font else ""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{_e(title)}"{family}>' + ("" if font else
                                                                               f"<title>{_e(title)}</title>")]


def _tip(text: str, font: str | None) -> str:
    return "" if font else f"<title>{_e(text)}</title>"


def _text(x: float, y: float, content: str, size: int = 12, anchor: str = "start", fill: str = INK,
          bold: bool = False, cls: str = "") -> str:
    """One text element (escaped); the fill is always given: fpdf2 draws a text without one invisibly."""
    weight = ' font-weight="600"' if bold else ""
    klass = f' class="{cls}"' if cls else ""
    return (f'<text{klass} x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" fill="{fill}"{weight}>'
            f'{_e(content)}</text>')


def label_baselines(b: BeforeAfter | Changes) -> list[float]:
    """The baseline of each row's label (the PDF writes the labels itself, in its fonts with their fallbacks)."""
    return [TOP + i * ROW_H[type(b)] + LABEL_DY[type(b)] for i in range(len(b.rows))]


def _label(parts: list[str], y: float, label: str, n: int, labels: bool) -> None:
    if labels:
        parts.append(_text(LEFT - 10, y, label[:34], 13, "end", bold=True, cls="label"))
    parts.append(_text(LEFT - 10, y + 16, f"n = {n}", 11, "end", MUTED, cls="n"))


def _whisker(parts: list[str], x0: float, x1: float, y: float) -> None:
    parts.append(f'<line class="ci" x1="{x0:.2f}" y1="{y:.1f}" x2="{x1:.2f}" y2="{y:.1f}" stroke="{INK}" '
                 'stroke-width="1.2"/>')
    for x in (x0, x1):
        parts.append(f'<line x1="{x:.2f}" y1="{y - 4:.1f}" x2="{x:.2f}" y2="{y + 4:.1f}" stroke="{INK}" '
                     'stroke-width="1.2"/>')


def _ci_text(ci, unit: str) -> str:
    return "" if not ci else f" (95% CI {ci[0]:.1f} to {ci[1]:.1f}{unit})"


def _grid(parts: list[str], x: float, top: float, bottom: float, tick: str, colour: str = "#e3e8ed") -> None:
    parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="{colour}"/>')
    parts.append(_text(x, bottom + 16, tick, 11, "middle"))


def before_after_svg(b: BeforeAfter, width: int = 720, font: str | None = None, labels: bool = True) -> str:
    """Two bars per row (before in grey, after in blue) on a 0-100 % axis, each with its interval."""
    row_h, bar_h = ROW_H[BeforeAfter], 16
    plot_w = width - LEFT - RIGHT
    bottom = TOP + row_h * len(b.rows)
    height = bottom + 36
    x = lambda v: LEFT + max(0.0, min(100.0, v)) / 100 * plot_w  # noqa: E731
    parts = _open(width, height, b.title, font)
    for k, (name, colour) in enumerate((("before", BEFORE), ("after", AFTER))):
        lx = LEFT + k * 90
        parts.append(f'<rect x="{lx}" y="6" width="12" height="12" fill="{colour}"/>' + _text(lx + 17, 16, name))
    for t in (0, 25, 50, 75, 100):
        _grid(parts, x(t), TOP - 4, bottom, f"{t}%")
    for i, r in enumerate(b.rows):
        y0 = TOP + i * row_h
        _label(parts, y0 + LABEL_DY[BeforeAfter], r.label, r.n, labels)
        for k, (name, v, ci, colour) in enumerate((("before", r.before, r.before_ci, BEFORE),
                                                   ("after", r.after, r.after_ci, AFTER))):
            y = y0 + 4 + k * (bar_h + 6)
            if v is None:
                parts.append(_text(LEFT + 4, y + 12, f"{name}: no images", 11, fill=MUTED))
                continue
            tip = f"{r.label}: {name} {v:.1f}%{_ci_text(ci, '%')}, n = {r.n}"
            parts.append(f'<rect class="{name}" x="{LEFT}" y="{y}" width="{x(v) - LEFT:.2f}" height="{bar_h}" '
                         f'fill="{colour}">{_tip(tip, font)}</rect>')
            if ci:
                _whisker(parts, x(ci[0]), x(ci[1]), y + bar_h / 2)
            parts.append(_text(LEFT + plot_w + 8, y + 12, f"{v:.1f}%", cls="value"))
    parts.append(_text(LEFT + plot_w / 2, height - 2, "accuracy (bars), 95% interval (whiskers)", 12, "middle",
                       MUTED) + "</svg>")
    return "".join(parts)


def _step(span: float) -> float:
    raw = max(span, 1.0) / 6
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def _span(b: Changes) -> tuple[float, float]:
    """The axis: zero, every interval and the margin line, padded to a round step."""
    vals = [0.0] + ([-b.margin] if b.margin is not None else [])
    for r in b.rows:
        vals += [v for v in ([r.change] + list(r.ci or [])) if v is not None]
    lo, hi = min(vals), max(vals)
    step = _step(hi - lo)
    return math.floor(lo / step - 0.5) * step, math.ceil(hi / step + 0.5) * step


def changes_svg(b: Changes, width: int = 720, font: str | None = None, labels: bool = True) -> str:
    """A bar per row from zero to its change with the interval; flagged rows in red; -margin dashed."""
    row_h, bar_h = ROW_H[Changes], 16
    plot_w = width - LEFT - RIGHT
    lo, hi = _span(b)
    bottom = TOP + row_h * len(b.rows)
    height = bottom + 36
    x = lambda v: LEFT + (v - lo) / (hi - lo) * plot_w  # noqa: E731
    parts = _open(width, height, b.title, font)
    step = _step(hi - lo)
    for k in range(int(round((hi - lo) / step)) + 1):
        t = lo + k * step
        _grid(parts, x(t), TOP - 4, bottom, f"{t:+g}" if t else "0")
    parts.append(f'<line class="zero" x1="{x(0):.2f}" y1="{TOP - 4}" x2="{x(0):.2f}" y2="{bottom}" stroke="{INK}"/>')
    if b.margin is not None:
        mx = x(-b.margin)
        parts.append(f'<line class="margin" x1="{mx:.2f}" y1="{TOP - 8}" x2="{mx:.2f}" y2="{bottom}" stroke="{FLAG}" '
                     f'stroke-width="1.5" stroke-dasharray="5 3">{_tip(f"guard margin: -{b.margin:g} points", font)}'
                     '</line>')
        parts.append(_text(mx - 4, TOP - 12, f"guard margin \u2212{b.margin:g} pt", 11, "end", FLAG, cls="margin"))
    for i, r in enumerate(b.rows):
        y0 = TOP + i * row_h
        _label(parts, y0 + LABEL_DY[Changes], r.label, r.n, labels)
        y = y0 + 4
        if r.change is None:
            parts.append(_text(LEFT + 4, y + 12, "no images", 11, fill=MUTED))
            continue
        colour = FLAG if r.flagged else GOOD if r.change >= 0 else BAD
        x0, x1 = sorted((x(0), x(r.change)))
        tip = (f"{r.label}: {r.change:+.1f} points{_ci_text(r.ci, ' points')}, n = {r.n}"
               + (", beyond the margin" if r.flagged else ""))
        parts.append(f'<rect class="{"flagged" if r.flagged else "change"}" x="{x0:.2f}" y="{y}" '
                     f'width="{max(0.5, x1 - x0):.2f}" height="{bar_h}" fill="{colour}">{_tip(tip, font)}</rect>')
        if r.ci:
            _whisker(parts, x(r.ci[0]), x(r.ci[1]), y + bar_h / 2)
        parts.append(_text(LEFT + plot_w + 8, y + 12, f"{r.change:+.1f} pt", cls="value"))
    parts.append(_text(LEFT + plot_w / 2, height - 2, "change in accuracy, points (bars), 95% paired interval "
                       "(whiskers)", 12, "middle", MUTED) + "</svg>")
    return "".join(parts)


def chart_svg(b: BeforeAfter | Changes, font: str | None = None, labels: bool = True) -> str:
    draw = before_after_svg if isinstance(b, BeforeAfter) else changes_svg
    return draw(b, font=font, labels=labels)


def chart_html(b: BeforeAfter | Changes) -> str:
    svg = chart_svg(b)
    cap = f'<p class="muted" dir="auto">{_e(b.caption)}</p>' if b.caption else ""
    return f'<div class="chart">{svg}</div>{cap}'
