"""The PDF's text engine: an fpdf2 document set up with the report's fonts, and text drawn into it.

fpdf2's multi_cell costs ~3 ms per call (and shaping ~0.1 ms per character), so plain text is wrapped here with
cached word widths and drawn line by line; only text that needs HarfBuzz (right-to-left, joining scripts,
combining marks) goes through multi_cell. The report's layout (pdf.py) draws through this class.
"""
from __future__ import annotations

import functools
import logging
import unicodedata

from .fonts import BOLD, REGULAR, plan_fonts
from .model import ReportDocument

log = logging.getLogger(__name__)

FAMILY = "dejavu"
BODY_PT = 9.5
LINE = 4.6  # mm, body line height
LONG_SHAPED = 1200  # characters; see TextCanvas._segments

# Total-pages placeholder. fpdf2 substitutes it in ALL text, so it is made of private-use characters that
# FontPlan.clean() removes from model text ("{nb}" in an answer would otherwise become a number), and it
# is 5 characters long: fpdf2 reserves that many digits (its default reserves 3, too few for 1,000 pages).
PAGES_ALIAS = "\ue000nbp\ue000"


@functools.lru_cache(maxsize=4096)
def needs_shaping(s: str) -> bool:
    """Right-to-left text, scripts whose letters join or reorder, and combining marks need HarfBuzz."""
    if s.isascii():
        return False
    for ch in s:
        o = ord(ch)
        if o < 0x0590:
            if 0x0300 <= o <= 0x036F:
                return True
            continue
        if unicodedata.bidirectional(ch) in ("R", "AL", "AN") or 0x0900 <= o <= 0x1CFF or \
                unicodedata.category(ch) == "Mn":
            return True
    return False


def _fpdf():
    from ..base.extras import require

    require("pdf", "PDF export")  # or export HTML, which needs nothing extra
    import fpdf

    return fpdf


def _pdf_class():
    fpdf = _fpdf()

    class ReportPDF(fpdf.FPDF):
        def footer(self) -> None:
            with self.local_context():  # leaves the body's font and colours as they were
                self.set_y(-11)
                self.set_font(FAMILY, "", 7.5)
                self.set_text_color(120, 120, 120)
                self.cell(0, 5, f"NEMO Desktop report  \u00b7  page {self.page_no()} of {PAGES_ALIAS}", align="C")

    return ReportPDF


class TextCanvas:
    """An A4 fpdf2 document with the fonts `doc` needs, its font state, and the text engine."""

    def __init__(self, doc: ReportDocument):
        self.plan = plan_fonts(doc.iter_text())
        pdf = _pdf_class()(orientation="P", unit="mm", format="A4")
        pdf.alias_nb_pages(PAGES_ALIAS)
        pdf.set_margins(15, 14, 15)
        pdf.set_auto_page_break(True, margin=16)
        pdf.add_font(FAMILY, "", str(REGULAR))
        pdf.add_font(FAMILY, "B", str(BOLD))
        names = []
        for i, path in enumerate(self.plan.fallbacks):
            name = f"fallback{i}"
            pdf.add_font(name, "", str(path), collection_font_number=0)
            names.append(name)
        if names:
            pdf.set_fallback_fonts(names, exact_match=False)
        self.pdf = pdf
        self.shaping_on = False
        try:
            pdf.set_text_shaping(True)
            self.can_shape = self.shaping_on = True
        except Exception as exc:  # uharfbuzz missing: still a usable PDF, RTL scripts unshaped
            log.warning("report: text shaping unavailable (%s); right-to-left text may render poorly", exc)
            self.can_shape = False
        self._shaping(False)
        self._wrap_cache: dict = {}
        self._widths: dict = {}
        self._font_state: tuple | None = None
        self._clean_cache: dict[str, str] = {}
        pdf.set_title(self.t(doc.title)[:200])
        pdf.set_creator("NEMO Desktop")

    # -------------------------------------------------------------------------------------- helpers
    def _shaping(self, on: bool) -> None:
        on = on and self.can_shape
        if on != self.shaping_on:
            self.pdf.set_text_shaping(on)
            self.shaping_on = on

    def _clean(self, s: str) -> str:
        hit = self._clean_cache.get(s)
        if hit is None:
            hit = self._clean_cache[s] = self.plan.clean(s)
        return hit

    def t(self, s: str) -> str:
        """Prepare a string for the very next draw call: clean it, and switch HarfBuzz shaping on only when
        it needs it (shaping every Latin string costs ~20x in line breaking)."""
        s = self._clean(s)
        self._shaping(needs_shaping(s))
        return s

    def font(self, size: float = BODY_PT, style: str = "", gray: int | None = None) -> None:
        state = (size, style, gray)
        if state == self._font_state:  # set_font/set_text_color cost ~60 us even when nothing changes
            return
        self.pdf.set_font(FAMILY, style, size)
        self.pdf.set_text_color(*((gray,) * 3 if gray is not None else (0, 0, 0)))
        self._font_state = state

    def space_left(self) -> float:
        return self.pdf.page_break_trigger - self.pdf.get_y()

    def ensure(self, mm: float) -> None:
        if self.space_left() < mm:
            self.pdf.add_page()

    def _char_widths(self) -> dict[str, float]:
        key = (self.pdf.font_style, self.pdf.font_size_pt)
        table = self._widths.get(key)
        if table is None:
            table = self._widths[key] = {}
        return table

    def _line_width(self, text: str) -> float:
        cw, total = self._char_widths(), 0.0
        for ch in text:
            v = cw.get(ch)
            if v is None:
                v = cw[ch] = self.pdf.get_string_width(ch)
            total += v
        return total

    def _wrap(self, s: str, width: float) -> list[str]:
        """Greedy word wrap in the current font (unshaped text: a string's width is the sum of its
        characters' widths); words longer than the column are cut."""
        key = (s, round(width, 2), self.pdf.font_style, self.pdf.font_size_pt)
        hit = self._wrap_cache.get(key)
        if hit is not None:
            return hit
        cw, w_of = self._char_widths(), self._line_width
        space = w_of(" ")
        out: list[str] = []
        for para in s.split("\n"):
            line, line_w = None, 0.0
            for word in para.split(" "):
                ww = w_of(word)
                if line is not None and line_w + space + ww <= width:
                    line, line_w = f"{line} {word}", line_w + space + ww
                    continue
                if line is not None:
                    out.append(line)
                if ww > width:  # a word longer than the column: cut it
                    start, acc = 0, 0.0
                    for i, ch in enumerate(word):
                        c = cw[ch]
                        if acc + c > width and i > start:
                            out.append(word[start:i])
                            start, acc = i, 0.0
                        acc += c
                    word, ww = word[start:], acc
                line, line_w = word, ww
            out.append(line or "")
        self._wrap_cache[key] = out
        return out

    def _segments(self, s: str) -> list[str]:
        """Text drawn as one block, except a very long text that needs shaping: that one is cut into runs of
        words that need shaping and runs that do not (each run starts a new line), so that a degenerate
        5,000-character answer with one Arabic word is not shaped character by character."""
        s = self._clean(s)
        if len(s) <= LONG_SHAPED or not needs_shaping(s):
            return [s]
        out: list[str] = []
        for para in s.split("\n"):
            run: list[str] = []
            run_shaped = None
            for word in para.split(" "):
                shaped = needs_shaping(word)
                if run and shaped != run_shaped:
                    out.append(" ".join(run))
                    run = []
                run.append(word)
                run_shaped = shaped
            out.append(" ".join(run))
        return out

    def text_height(self, s: str, width: float, lh: float) -> float:
        lines = 0
        for seg in self._segments(s):
            self._shaping(needs_shaping(seg))
            if self.shaping_on:
                lines += max(1, len(self.pdf.multi_cell(width, lh, seg, dry_run=True, output="LINES")))
            else:
                lines += max(1, len(self._wrap(seg, width)))
        return lines * lh

    def draw_text(self, s: str, x: float, width: float, lh: float, align: str = "L", fill=None,
                  link=None) -> None:
        """Draw at (x, current y), breaking pages as needed; leaves y below the text. A fill colours the
        full text width of the page behind each line (call-out boxes)."""
        for seg in self._segments(s):
            self._shaping(needs_shaping(seg))
            self._draw_segment(seg, x, width, lh, align, fill, link)

    def _draw_segment(self, s: str, x: float, width: float, lh: float, align: str, fill, link) -> None:
        pdf = self.pdf
        if fill:
            pdf.set_fill_color(*fill)
        if self.shaping_on:
            if fill:  # colour the full-width band like the plain-text path does, then draw on top of it
                h = max(1, len(pdf.multi_cell(width, lh, s, dry_run=True, output="LINES"))) * lh
                if h > self.space_left() and h < pdf.page_break_trigger - pdf.t_margin:
                    pdf.add_page()
                pdf.rect(pdf.l_margin, pdf.get_y(), pdf.epw, min(h, self.space_left()), style="F")
            pdf.set_x(x)
            pdf.multi_cell(width, lh, s, align=align, link=link, new_x="LEFT", new_y="NEXT")
            return
        y = pdf.get_y()
        for line in self._wrap(s, width):
            if y + lh > pdf.page_break_trigger:
                pdf.add_page()
                y = pdf.get_y()
            if fill:
                pdf.rect(pdf.l_margin, y, pdf.epw, lh, style="F")
            if self.plan.in_main_font(line):
                # text() is ~5x cheaper than cell() but knows no fallback fonts: only for DejaVu-only lines.
                lx = x
                if align != "L":
                    free = width - self._line_width(line)
                    lx += free if align == "R" else free / 2
                pdf.text(lx, y + 0.5 * lh + 0.3 * pdf.font_size, line)
                if link is not None:
                    pdf.link(x, y, width, lh, link)
            else:
                pdf.set_xy(x, y)
                pdf.cell(width, lh, line, align=align, link=link if link is not None else "")
            y += lh
        pdf.set_xy(x, y)

    def text(self, s: str, h: float = LINE, fill=None) -> None:
        self.draw_text(s, self.pdf.l_margin, self.pdf.epw, h, fill=fill)
        self.pdf.set_x(self.pdf.l_margin)
