"""Render a ReportDocument as a paginated A4 PDF with fpdf2 (pure Python, no Qt, no display needed).

Why fpdf2 rather than Qt's QTextDocument + QPdfWriter: the core must stay Qt-free and `nemo report`
must work on a headless server where PySide6 (an optional extra) may be absent. fpdf2 depends only on
Pillow, fontTools and defusedxml; with uharfbuzz installed it shapes text through HarfBuzz and applies
the Unicode bidi algorithm, so Arabic joins correctly and right-to-left lines run right to left. Fonts:
the bundled DejaVu Sans, plus system emoji/CJK fonts only when the report needs them (see fonts.py).
Charts are drawn as vector paths. Model text is only ever passed as plain text: never with markdown, as
a link, or as an image path (images are in-memory PNG/JPEG bytes).

This module lays the report's blocks out on pages; pdf_text.py holds the text engine it draws with,
pdf_charts.py the interval charts.
"""
from __future__ import annotations

import io
import math

from ..base.job_context import JobContext, null_context
from .model import (BeforeAfter, Changes, Figures, Highlighted, Histogram, Index, KeyValues, Paragraph, ReportDocument,
                    ReportImage, Section, Table)
from .pdf_charts import draw_chart
from .pdf_text import BODY_PT, FAMILY, LINE, TextCanvas, needs_shaping

__all__ = ["needs_shaping", "render_pdf"]

TABLE_PT = 8.5
TABLE_LINE = 4.0
PAD = 1.3
NOTE_LINE = 3.2  # the size note under an enlarged image in a table cell
CELL_IMAGE_MM = 22.0
PALETTE = [(47, 109, 181), (217, 130, 43), (58, 154, 91), (184, 69, 63), (125, 91, 166), (138, 109, 59)]
FILLS = {"callout": (238, 244, 251), "warning": (255, 243, 224)}
HEADING_PT = (15.0, 12.5, 11.0, 10.0)
TOC_HEAD = 8.0  # mm: the "Contents" heading
TOC_LINE = LINE + 0.6


class _Renderer(TextCanvas):
    def __init__(self, doc: ReportDocument):
        super().__init__(doc)
        self.doc = doc
        self._measuring = False  # a throwaway renderer that measures a keep-together section
        self._inline_toc: tuple[int, float] | None = None  # (page, y) of contents drawn after the sections
        # Links for every anchor an index points at; aimed at page 1 until the section is drawn.
        self.links = {r.anchor: self.pdf.add_link(page=1) for _, s in doc.iter_sections()
                      for b in s.blocks if isinstance(b, Index) for r in b.rows}

    # --------------------------------------------------------------------------------------- blocks
    def header(self) -> None:
        pdf, doc = self.pdf, self.doc
        pdf.add_page()
        self.font(18, "B")
        self.text(doc.title, 8)
        self.font(11, gray=70)
        self.text(doc.subtitle, 5.5)
        meta = "   \u00b7   ".join([f"Generated {doc.generated_at}"] + [f"{k}: {v}" for k, v in doc.meta])
        self.font(8, gray=110)
        self.text(meta, 4.2)
        pdf.ln(3)
        if doc.kind == "run":
            # The contents get exactly the pages they need, reserved now: pages inserted later (fpdf2's
            # allow_extra_pages) would shift every page number already printed in the footers.
            entries = len(doc.sections)  # one outline entry of level 0 per top-level section
            first, later = self._toc_capacity(pdf.get_y())
            if entries <= first:
                # Contents that fit on the first page take only their own lines there (a reserved page would
                # leave the first page nearly empty): the room is kept now and filled in once the section
                # pages are known (render()).
                self._inline_toc = (pdf.page_no(), pdf.get_y())
                pdf.set_y(pdf.get_y() + TOC_HEAD + 1 + entries * TOC_LINE + 4)
                return
            pages = 1 + math.ceil((entries - first) / later)
            pdf.insert_toc_placeholder(self.toc, pages=pages)

    def _toc_capacity(self, y0: float) -> tuple[int, int]:
        """Contents lines on the first page (from y0, after the heading) and on each later page."""
        pdf = self.pdf
        first = int((pdf.page_break_trigger - y0 - TOC_HEAD) // TOC_LINE)
        return max(0, first), int((pdf.page_break_trigger - pdf.t_margin) // TOC_LINE)

    def toc(self, pdf, outline) -> None:
        """Called by fpdf2 at output time, on the reserved pages, whatever the font state is then."""
        self._font_state = None
        auto_break = pdf.auto_page_break
        pdf.set_auto_page_break(False, margin=pdf.b_margin)  # breaks are placed by hand, see header()
        pdf.set_x(pdf.l_margin)
        self.font(13, "B")
        self.text("Contents", TOC_HEAD - 1)
        pdf.ln(1)
        self.font(BODY_PT)
        for sec in outline:
            if sec.level != 0:
                continue
            if pdf.get_y() + TOC_LINE > pdf.page_break_trigger:
                pdf.add_page()  # the next reserved page
                pdf.set_y(pdf.t_margin)
            link = pdf.add_link(page=sec.page_number)
            y = pdf.get_y()
            pdf.set_x(pdf.l_margin)
            pdf.cell(pdf.epw - 16, TOC_LINE, self.t(sec.name)[:110], link=link)
            pdf.set_xy(pdf.l_margin + pdf.epw - 16, y)
            pdf.cell(16, TOC_LINE, str(sec.page_number), align="R", link=link, new_x="LMARGIN", new_y="NEXT")
        pdf.set_auto_page_break(auto_break, margin=pdf.b_margin)

    def heading(self, s: Section, depth: int) -> None:
        pdf = self.pdf
        if s.new_page:
            if pdf.get_y() > pdf.t_margin + 0.5:  # not already at the top of a fresh page
                pdf.add_page()
        else:
            self.ensure(50 if depth <= 1 else 32)  # never leave a heading alone at the foot of a page
        if depth == 0:
            pdf.ln(3)
        if depth <= 1:
            pdf.start_section(self.t(s.title)[:150], level=depth)
        if s.anchor in self.links:
            pdf.set_link(self.links[s.anchor], y=pdf.get_y(), page=pdf.page_no())
        size = HEADING_PT[min(depth, 3)]
        self.font(size, "B", gray=None if depth < 2 else 40)
        self.text(s.title, size * 0.48)
        if depth == 0:
            pdf.set_draw_color(200, 206, 212)
            pdf.set_line_width(0.4)
            pdf.line(pdf.l_margin, pdf.get_y() + 0.5, pdf.l_margin + pdf.epw, pdf.get_y() + 0.5)
            pdf.ln(2.5)
        else:
            pdf.ln(1)

    def paragraph(self, b: Paragraph) -> None:
        if b.style in FILLS:
            pdf, fill = self.pdf, FILLS[b.style]
            self.font(BODY_PT + (0.8 if b.style == "callout" else 0))
            self.ensure(LINE * 2 + 4)
            pdf.set_fill_color(*fill)
            pdf.rect(pdf.l_margin, pdf.get_y(), pdf.epw, 2, style="F")
            pdf.set_y(pdf.get_y() + 2)
            self.draw_text(b.text, pdf.l_margin + 3, pdf.epw - 6, LINE + 0.4, fill=fill)
            pdf.set_fill_color(*fill)
            pdf.rect(pdf.l_margin, pdf.get_y(), pdf.epw, 2, style="F")
            pdf.set_xy(pdf.l_margin, pdf.get_y() + 2)
        elif b.style == "muted":
            self.font(BODY_PT - 1, gray=95)
            self.text(b.text, LINE - 0.6)
        else:
            self.font(BODY_PT)
            self.text(b.text)
        self.pdf.ln(1.8)

    def _note_height(self, note: str, w: float) -> float:
        """The size note under an enlarged image ("32×32 px, shown ×2"), wrapped to the cell: all of it shows."""
        if not note:
            return 0.0
        self.font(TABLE_PT - 2, gray=95)
        return self.text_height(note, w - 2 * PAD, NOTE_LINE - 0.5) + 0.5

    def _cell_height(self, cell, w: float, bold: bool) -> float:
        if isinstance(cell, ReportImage):
            iw = min(w - 2 * PAD, CELL_IMAGE_MM)
            return iw * cell.height / cell.width + 2 * PAD + self._note_height(cell.size_note, w)
        self.font(TABLE_PT, "B" if bold else "")
        return self.text_height(cell, w - 2 * PAD, TABLE_LINE) + 2 * PAD

    def _row(self, cells, col_w, aligns, y, h, bold_first=False, fill=None, link=None) -> None:
        pdf, x = self.pdf, self.pdf.l_margin
        for c, (cell, w) in enumerate(zip(cells, col_w)):
            if fill:
                pdf.set_fill_color(*fill)
                pdf.rect(x, y, w, h, style="F")
            if isinstance(cell, ReportImage):
                iw = min(w - 2 * PAD, CELL_IMAGE_MM)
                ih = iw * cell.height / cell.width
                pdf.image(io.BytesIO(cell.data), x=x + (w - iw) / 2, y=y + PAD, w=iw, h=ih)
                if cell.size_note:  # an enlarged small image says its real size (cells have no caption)
                    self.font(TABLE_PT - 2, gray=95)
                    pdf.set_y(y + PAD + ih + 0.5)
                    self.draw_text(cell.size_note, x + PAD, w - 2 * PAD, NOTE_LINE - 0.5, align="C")
            else:
                self.font(TABLE_PT, "B" if (bold_first and c == 0) or fill else "")
                pdf.set_y(y + PAD)
                self.draw_text(cell, x + PAD, w - 2 * PAD, TABLE_LINE, align=aligns[c], link=link if c == 0 else None)
            pdf.set_draw_color(210, 215, 220)
            pdf.set_line_width(0.2)
            pdf.rect(x, y, w, h)
            x += w
        pdf.set_xy(pdf.l_margin, y + h)

    def column_widths(self, header, widths) -> list[float]:
        """Each column's width in mm: the page's width shared by `widths`, except that a column narrower than its
        header's longest word (bold) is widened to it, taking the room from the columns with room to spare. A
        header then never breaks mid-word ("Competen|cy") while the table fits the page."""
        epw = self.pdf.epw
        col_w = [epw * w / sum(widths) for w in widths]
        if not header:
            return col_w
        self.font(TABLE_PT, "B")
        need = [max((self._line_width(self._clean(word)) for word in h.split()), default=0.0) + 2 * PAD + 0.2
                if isinstance(h, str) else 0.0 for h in header]
        short = sum(max(0.0, n - w) for n, w in zip(need, col_w))
        if short <= 0:
            return col_w
        spare = [max(0.0, w - n) for n, w in zip(need, col_w)]
        if sum(spare) < short:  # the words cannot all fit: widths follow the words (a word may still break)
            return [epw * n / sum(need) for n in need]
        take = short / sum(spare)
        return [max(n, w - s * take) for n, w, s in zip(need, col_w, spare)]

    def _table(self, header, rows, widths, align, bold_first=False, links=None) -> None:
        """A grid drawn by hand: rows never split, a row taller than a page is laid out as a list instead
        (fpdf2's own table refuses such rows, and a 5,000-character model answer makes one)."""
        pdf = self.pdf
        col_w = self.column_widths(header, widths)
        aligns = [{"l": "L", "r": "R", "c": "C"}.get(a, "L") for a in align]
        head_h = max((self._cell_height(h, w, True) for h, w in zip(header, col_w)), default=0)
        page_room = pdf.page_break_trigger - pdf.t_margin - head_h - 2

        def draw_header():
            if header:
                self._row(header, col_w, aligns, pdf.get_y(), head_h, fill=(241, 244, 247))

        first_h = max((self._cell_height(c, w, bold_first and i == 0) for i, (c, w) in
                       enumerate(zip(rows[0], col_w))), default=0) if rows else 0
        self.ensure(head_h + min(max(10, first_h), page_room))  # the header never ends a page without a row
        draw_header()
        for r, cells in enumerate(rows):
            h = max(self._cell_height(c, w, bold_first and i == 0) for i, (c, w) in enumerate(zip(cells, col_w)))
            link = links[r] if links else None
            if h > page_room:
                self._stacked(header, cells, bold_first)
                continue
            if h > self.space_left():
                pdf.add_page()
                draw_header()
            self._row(cells, col_w, aligns, pdf.get_y(), h, bold_first=bold_first, link=link)
        pdf.ln(2)

    def _stacked(self, header, cells, bold_first) -> None:
        """One over-tall row as "column: value" paragraphs that may run over several pages."""
        pdf = self.pdf
        pdf.ln(1)
        for i, cell in enumerate(cells):
            name = header[i] if i < len(header) else ""
            if isinstance(cell, ReportImage):
                self.ensure(32)
                pdf.image(io.BytesIO(cell.data), x=pdf.l_margin, w=30, h=30 * cell.height / cell.width)
                continue
            if name:
                self.font(TABLE_PT, "B")
                self.text(name, TABLE_LINE)
            self.font(TABLE_PT, "B" if bold_first and i == 0 else "")
            self.text(cell, TABLE_LINE)
        pdf.set_draw_color(210, 215, 220)
        pdf.line(pdf.l_margin, pdf.get_y() + 1, pdf.l_margin + pdf.epw, pdf.get_y() + 1)
        pdf.ln(2)

    def table(self, b: Table) -> None:
        n = len(b.header)
        self._table(b.header, b.rows, b.widths or [1] * n, b.align or ["l"] * n)
        if b.caption:
            self.font(BODY_PT - 1.5, gray=95)
            self.text(b.caption, LINE - 0.8)
            self.pdf.ln(1.5)

    def key_values(self, b: KeyValues) -> None:
        self._table([], [[k, v] for k, v in b.rows], [2.6, 7.4], ["l", "l"], bold_first=True)

    def index(self, b: Index) -> None:
        n = len(b.header)
        widths = [0.6, 3, 2.2, 2.2] + [1.6] * (n - 4) if n >= 4 else [1] * n
        self._table(b.header, [r.cells for r in b.rows], widths, ["r", "l", "l", "l"] + ["r"] * (n - 4),
                    links=[self.links[r.anchor] for r in b.rows])

    def figures(self, b: Figures) -> None:
        pdf, gap = self.pdf, 5.0
        per_row = 3
        for start in range(0, len(b.images), per_row):
            ims = b.images[start:start + per_row]
            w = [min(58.0, max(24.0, im.width * 0.3), (pdf.epw - gap * (len(ims) - 1)) / len(ims)) for im in ims]
            h = [wi * im.height / im.width for wi, im in zip(w, ims)]
            self.ensure(max(h) + 12)
            y0, x = pdf.get_y(), pdf.l_margin
            bottom = y0
            self.font(BODY_PT - 1.5, gray=70)
            for im, wi, hi in zip(ims, w, h):
                pdf.image(io.BytesIO(im.data), x=x, y=y0, w=wi, h=hi)
                pdf.set_draw_color(210, 215, 220)
                pdf.rect(x, y0, wi, hi)
                pdf.set_y(y0 + hi + 1)
                self.draw_text(im.caption, x, wi, 3.6)
                bottom = max(bottom, pdf.get_y())
                x += wi + gap
            pdf.set_xy(pdf.l_margin, bottom + 3)
        if b.caption:
            self.font(BODY_PT - 1, gray=95)
            self.text(b.caption)

    def histogram(self, b: Histogram) -> None:
        pdf = self.pdf
        left, row_h = 42.0, 20.0
        plot_w = pdf.epw - left - 4
        self.ensure(row_h * len(b.series) + 18)
        lo, hi = b.edges[0], b.edges[-1]
        x = lambda v: pdf.l_margin + left + (v - lo) / (hi - lo) * plot_w  # noqa: E731
        peak = max((max(s.counts) for s in b.series if s.counts), default=1) or 1
        y_top = pdf.get_y()
        for i, s in enumerate(b.series):
            y0 = y_top + i * row_h
            base = y0 + row_h - 3
            self.font(BODY_PT, "B")
            pdf.set_xy(pdf.l_margin, y0 + 4)
            pdf.cell(left - 3, LINE, self.t(s.label)[:28], align="R")
            self.font(BODY_PT - 1.5, gray=95)
            pdf.set_xy(pdf.l_margin, y0 + 4 + LINE)
            mean = b.mean_text(s)
            pdf.cell(left - 3, LINE, f"n = {s.n}, {mean}", align="R")
            pdf.set_draw_color(150, 160, 170)
            pdf.set_line_width(0.25)
            pdf.line(x(lo), base, x(hi), base)
            pdf.set_fill_color(*PALETTE[i % len(PALETTE)])
            for k, c in enumerate(s.counts):
                if c:
                    hgt = (row_h - 6) * c / peak
                    x0, x1 = x(b.edges[k]), x(b.edges[k + 1])
                    pdf.rect(x0 + 0.3, base - hgt, max(0.2, x1 - x0 - 0.6), hgt, style="F")
            if s.mean is not None:
                pdf.set_draw_color(30, 35, 41)
                with pdf.local_context(dash_pattern=dict(dash=1.2, gap=0.8)):
                    pdf.line(x(s.mean), y0 + 1, x(s.mean), base)
        y_axis = y_top + row_h * len(b.series)
        if lo < 0 < hi:
            pdf.set_draw_color(184, 69, 63)
            pdf.line(x(0), y_top, x(0), y_axis - 3)
        self.font(BODY_PT - 2, gray=60)
        step = max(1, len(b.edges) // 10)
        for k in range(0, len(b.edges), step):
            pdf.set_xy(x(b.edges[k]) - 8, y_axis - 2)
            pdf.cell(16, 4, f"{b.edges[k]:g}", align="C")
        self.font(BODY_PT - 1, gray=70)
        pdf.set_xy(pdf.l_margin + left, y_axis + 2.5)
        pdf.cell(plot_w, 4.5, self.t(b.x_label), align="C")
        pdf.set_xy(pdf.l_margin, y_axis + 9)

    def block(self, b) -> None:
        if isinstance(b, Paragraph):
            self.paragraph(b)
        elif isinstance(b, Highlighted):  # no shaded runs in PDF: the weighty pieces in [brackets]
            self.paragraph(Paragraph(b.plain()))
            if b.caption:
                self.paragraph(Paragraph(b.caption, "muted"))
        elif isinstance(b, KeyValues):
            self.key_values(b)
        elif isinstance(b, Table):
            self.table(b)
        elif isinstance(b, Figures):
            self.figures(b)
        elif isinstance(b, Histogram):
            self.histogram(b)
        elif isinstance(b, Index):
            self.index(b)
        elif isinstance(b, (BeforeAfter, Changes)):
            draw_chart(self, b, FAMILY)
            if b.caption:
                self.paragraph(Paragraph(b.caption, "muted"))
        else:
            raise TypeError(f"unknown report block {type(b).__name__}")

    def section(self, s: Section, depth: int) -> None:
        if s.keep_together and not s.new_page and not self._measuring:
            h = self._measure(s, depth)
            if h is not None and h > self.space_left():
                self.pdf.add_page()
        elif not s.new_page and s.blocks:
            # A heading never ends a page alone: it goes with the start of its first block (estimated here:
            # a throwaway renderer per section would cost ~0.4 s each).
            need = self._heading_height(s, depth) + self._lead_height(s.blocks[0])
            page = self.pdf.page_break_trigger - self.pdf.t_margin
            if self.space_left() < need < page:
                self.pdf.add_page()
        self.heading(s, depth)
        for b in s.blocks:
            self.block(b)
        for c in s.children:
            self.section(c, depth + 1)

    def _heading_height(self, s: Section, depth: int) -> float:
        size = HEADING_PT[min(depth, 3)]
        self.font(size, "B")
        return self.text_height(s.title, self.pdf.epw, size * 0.48) + (6.5 if depth == 0 else 1.0)

    def _lead_height(self, b) -> float:
        """The height of the start of `b` that must share a page with its heading: a table's header and first
        row, the first lines of a paragraph; a chart or figure row whole (estimated)."""
        pdf = self.pdf
        if isinstance(b, (Table, KeyValues)):
            if isinstance(b, Table):
                header, rows, widths = b.header, b.rows[:1], b.widths or [1] * len(b.header)
                bold_first = False
            else:
                header, rows, widths, bold_first = [], [[k, v] for k, v in b.rows[:2]], [2.6, 7.4], True
            col_w = self.column_widths(header, widths)
            head = max((self._cell_height(h, w, True) for h, w in zip(header, col_w)), default=0)
            body = sum(max((self._cell_height(c, w, bold_first and i == 0) for i, (c, w) in
                            enumerate(zip(cells, col_w))), default=0) for cells in rows)
            return head + body + 2
        if isinstance(b, Paragraph):
            self.font(BODY_PT)
            return min(self.text_height(b.text, pdf.epw - 6, LINE), 3 * LINE) + 6
        if isinstance(b, Index):
            return 2 * TOC_LINE + 6
        return 45.0

    def _measure(self, s: Section, depth: int) -> float | None:
        """Height of `s` drawn at the top of a fresh page by a throwaway renderer; None when it takes more than
        one page (then splitting it cannot be avoided)."""
        scratch = _Renderer(ReportDocument(kind=self.doc.kind, title="", subtitle="", generated_at="",
                                           sections=[s]))
        scratch._measuring = True
        scratch.pdf.add_page()
        y0 = scratch.pdf.get_y()
        scratch.section(s, depth)
        return scratch.pdf.get_y() - y0 if scratch.pdf.page_no() == 1 else None

    def render(self, ctx: JobContext) -> bytes:
        self.header()
        n = len(self.doc.sections)
        for i, s in enumerate(self.doc.sections):
            ctx.check_cancelled()
            ctx.progress("Rendering PDF", i, n)
            self.section(s, 0)
        ctx.progress("Rendering PDF", n, n)
        if self._inline_toc is not None:
            pdf = self.pdf
            last_page, last_y = pdf.page, pdf.get_y()
            pdf.page, y = self._inline_toc
            pdf.set_y(y)
            self.toc(pdf, list(pdf._outline))  # the reserved lines hold it: no page break happens
            pdf.page = last_page
            pdf.set_y(last_y)
        return bytes(self.pdf.output())


def render_pdf(doc: ReportDocument, *, ctx: JobContext | None = None) -> bytes:
    """The report as PDF bytes (progress per top-level section; cancellable between sections)."""
    return _Renderer(doc).render(ctx or null_context())
