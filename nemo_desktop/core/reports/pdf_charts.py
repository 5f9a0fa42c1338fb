"""The interval charts (BeforeAfter, Changes) in the PDF: the same SVG as the HTML report (svg_charts.py), drawn
as vector paths by fpdf2's SVG reader in the report's own font, scaled to the text width."""
from __future__ import annotations

import io
import re

from .document import BeforeAfter, Changes
from .svg_charts import chart_svg

_VIEWBOX = re.compile(r'viewBox="0 0 (\d+(?:\.\d+)?) (\d+(?:\.\d+)?)"')


def draw_chart(renderer, b: BeforeAfter | Changes, family: str) -> float:
    """Draw `b` at the renderer's cursor (a new page first when it does not fit); returns its height in mm."""
    pdf = renderer.pdf
    svg = chart_svg(b, font=family)
    w_px, h_px = (float(v) for v in _VIEWBOX.search(svg).groups())
    width = pdf.epw
    height = width * h_px / w_px
    renderer.ensure(height + 2)
    y = pdf.get_y()
    pdf.image(io.BytesIO(svg.encode("utf-8")), x=pdf.l_margin, y=y, w=width, h=height)
    pdf.set_xy(pdf.l_margin, y + height + 2)
    return height
