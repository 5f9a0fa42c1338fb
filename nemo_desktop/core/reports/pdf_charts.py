"""The interval charts (BeforeAfter, Changes) in the PDF: the same SVG as the HTML report (svg_charts.py), drawn
as vector paths by fpdf2's SVG reader in the report's own font, scaled to the text width. The row labels (class
names, in any script) are written by the renderer's text engine instead, with its fallback fonts and shaping."""
from __future__ import annotations

import io
import re

from .document import BeforeAfter, Changes
from .svg_charts import LEFT, chart_svg, label_baselines

_VIEWBOX = re.compile(r'viewBox="0 0 (\d+(?:\.\d+)?) (\d+(?:\.\d+)?)"')


def draw_chart(renderer, b: BeforeAfter | Changes, family: str, size_pt: float = 8.5) -> float:
    """Draw `b` at the renderer's cursor (a new page first when it does not fit); returns its height in mm."""
    pdf = renderer.pdf
    svg = chart_svg(b, font=family, labels=False)
    w_px, h_px = (float(v) for v in _VIEWBOX.search(svg).groups())
    width = pdf.epw
    height = width * h_px / w_px
    renderer.ensure(height + 2)
    y = pdf.get_y()
    pdf.image(io.BytesIO(svg.encode("utf-8")), x=pdf.l_margin, y=y, w=width, h=height)
    scale = width / w_px  # mm per SVG unit
    renderer.font(size_pt, "B")
    line = size_pt * 0.45
    for r, base in zip(b.rows, label_baselines(b)):
        pdf.set_xy(pdf.l_margin, y + base * scale - line * 0.8)  # one line: 28 characters fit the label column
        renderer.draw_text(renderer.t(r.label)[:28], pdf.l_margin, (LEFT - 10) * scale, line, align="R")
    pdf.set_xy(pdf.l_margin, y + height + 2)
    return height
