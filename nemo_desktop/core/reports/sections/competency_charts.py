"""Two small charts of the competency report sections, drawn with Pillow (already a dependency; the report
model embeds PNG images in both HTML and PDF, and no plotting library is installed):

- `parts_chart`: the unsure-vs-unfamiliar bars of one image (confidence, P(in-distribution), competency) against
  the threshold;
- `calibration_chart`: the calibration search (mean competency on the held-out images for each z), the
  classifier's accuracy it is matched to, and the chosen z.
"""
from __future__ import annotations

import io
from typing import Sequence

from PIL import Image, ImageDraw, ImageFont

from ..images import ReportImage

INK, GRID, BAR, LOW, ACCENT = (40, 40, 40), (210, 210, 210), (70, 120, 180), (200, 80, 60), (230, 150, 30)


def _png(im: Image.Image, caption: str) -> ReportImage:
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return ReportImage(buf.getvalue(), im.width, im.height, caption, caption)


def _font():
    return ImageFont.load_default()


def parts_chart(confidence: float, id_probability: float, competency: float, threshold: float,
                width: int = 420) -> ReportImage:
    """Horizontal bars in [0, 1]; a bar below the threshold is drawn in the warning colour."""
    rows = [("confidence (unsure when low)", confidence), ("P(in-distribution) (unfamiliar when low)", id_probability),
            ("competency = product", competency)]
    label_w, bar_h, gap, top = 230, 16, 10, 8
    plot_w = width - label_w - 40
    height = top + len(rows) * (bar_h + gap) + 22
    im = Image.new("RGB", (width, height), "white")
    d, font = ImageDraw.Draw(im), _font()
    x0 = label_w

    def x(v: float) -> int:
        return x0 + int(round(max(0.0, min(1.0, v)) * plot_w))

    for k, (label, v) in enumerate(rows):
        y = top + k * (bar_h + gap)
        d.text((4, y + 3), label, fill=INK, font=font)
        d.rectangle([x0, y, x0 + plot_w, y + bar_h], outline=GRID)
        d.rectangle([x0, y, x(v), y + bar_h], fill=LOW if v < threshold else BAR)
        d.text((x0 + plot_w + 4, y + 3), f"{v:.2f}", fill=INK, font=font)
    tx = x(threshold)
    d.line([tx, top - 4, tx, height - 18], fill=ACCENT, width=2)
    d.text((max(0, tx - 30), height - 14), f"threshold {threshold:g}", fill=ACCENT, font=font)
    return _png(im, "Competency and its parts (red: below the threshold)")


def calibration_chart(grid: Sequence[float], curve: Sequence[float], accuracy: float, chosen_z: float,
                      n: int | None, width: int = 480, height: int = 240) -> ReportImage:
    """Mean competency against z (line), the accuracy to match (dashed), the chosen z (marker)."""
    left, right, top, bottom = 44, 12, 10, 30
    im = Image.new("RGB", (width, height), "white")
    d, font = ImageDraw.Draw(im), _font()
    zmax = max(grid) if grid and max(grid) > 0 else 1.0
    pw, ph = width - left - right, height - top - bottom

    def xy(z: float, v: float) -> tuple[int, int]:
        return left + int(round(z / zmax * pw)), top + int(round((1 - max(0.0, min(1.0, v))) * ph))

    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = xy(0, v)[1]
        d.line([left, y, left + pw, y], fill=GRID)
        d.text((4, y - 5), f"{v:.2f}", fill=INK, font=font)
    d.text((left, height - 14), "0", fill=INK, font=font)
    d.text((left + pw - 40, height - 14), f"z = {zmax:g}", fill=INK, font=font)
    ay = xy(0, accuracy)[1]
    for xs in range(left, left + pw, 10):
        d.line([xs, ay, min(xs + 5, left + pw), ay], fill=ACCENT, width=2)
    if len(grid) > 1:
        d.line([xy(z, c) for z, c in zip(grid, curve)], fill=BAR, width=2)
    cz = min(range(len(grid)), key=lambda i: abs(grid[i] - chosen_z)) if grid else None
    if cz is not None:
        px, py = xy(grid[cz], curve[cz])
        d.ellipse([px - 4, py - 4, px + 4, py + 4], outline=LOW, width=2)
    caption = (f"Calibration: mean competency on the held-out images{f' (n = {n})' if n is not None else ''} for "
               f"each z (blue), the classifier's accuracy {accuracy:.3f} (orange), the chosen z = {chosen_z:g} (red)")
    return _png(im, caption)
