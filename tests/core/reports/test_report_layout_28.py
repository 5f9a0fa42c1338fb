"""Issue 28 §12: a thumbnail's size note ("32×32 px, shown ×2") is never cut off; a batch / run PDF's first page
carries the summary, not a contents page alone; a heading never ends a page alone; the manifest is an appendix;
HTML table headers never break mid-word."""
from __future__ import annotations

import io
import shutil
import subprocess

import pytest
from PIL import Image

from nemo_desktop.core.reports import render_html
from nemo_desktop.core.reports.document import Paragraph, ReportDocument, Section, Table
from nemo_desktop.core.reports.images import ReportImage
from nemo_desktop.core.reports.pdf import _Renderer, render_pdf
from report_fixtures import make_run

needs_pdftotext = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext missing (poppler-utils)")


def _pages(pdf: bytes, tmp_path) -> list[str]:
    path = tmp_path / "r.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout
    return text.split("\f")


def _small_image(side: int = 32, upscale: int = 2) -> ReportImage:
    buf = io.BytesIO()
    Image.new("RGB", (side * upscale, side * upscale), (200, 30, 30)).save(buf, "PNG")
    return ReportImage(buf.getvalue(), side * upscale, side * upscale, upscale=upscale)


def test_the_size_note_gets_the_lines_it_needs():
    doc = ReportDocument(kind="single", title="t", subtitle="", generated_at="", sections=[])
    r = _Renderer(doc)
    r.pdf.add_page()
    image = _small_image()
    wide, narrow = r._cell_height(image, 60, False), r._cell_height(image, 14, False)
    r.font(8.5 - 2)
    lines = r.text_height(image.size_note, 14 - 2 * 1.3, 3.2 - 0.5) / (3.2 - 0.5)
    assert lines >= 2  # "32×32 px, shown ×2" wraps in a 14 mm column ...
    picture = min(14 - 2 * 1.3, 22.0)
    assert narrow >= picture + 2 * 1.3 + lines * (3.2 - 0.5)  # ... and the row is tall enough for every line
    assert wide > min(60 - 2 * 1.3, 22.0)


@needs_pdftotext
def test_a_run_reports_first_page_has_the_summary_and_the_manifest_is_an_appendix(store, tmp_path):
    from nemo_desktop.core.reports import build_run_report

    run_id = make_run(store, n_samples=3, methods=("scitx",))
    doc = build_run_report(run_id, store)
    assert doc.sections[-1].title.startswith("Appendix: reproducibility manifest")
    pages = _pages(render_pdf(doc), tmp_path)
    assert "Contents" in pages[0] and "Summary" in pages[0].split("Contents", 1)[1]
    assert "Appendix: reproducibility manifest" in pages[0]  # listed in the contents ...
    first = next(i for i, p in enumerate(pages) if "Appendix: reproducibility" in p and "Contents" not in p)
    assert first >= len(pages) - 3  # ... and printed at the end


@needs_pdftotext
def test_a_heading_never_ends_a_page_alone(tmp_path):
    long = " ".join(["A long model answer that wraps over many lines of its cell."] * 18)
    rows = [[f"row {i}", long] for i in range(3)]  # each row ~45 mm tall: more than the old 50 mm rule kept
    for filler in range(30, 62, 2):
        text = " ".join(["Filler words to take up room on the page."] * 8)
        doc = ReportDocument(kind="single", title="Layout", subtitle="", generated_at="", sections=[
            Section("Filler", "f", [Paragraph(text) for _ in range(filler // 2)]),
            Section("Tall rows", "t", [Table(["Item", "Answer"], rows, widths=[1, 3])])])
        pages = _pages(render_pdf(doc), tmp_path)
        for page in pages:
            lines = [ln.strip() for ln in page.splitlines() if ln.strip() and not ln.strip().startswith("Page ")]
            lines = [ln for ln in lines if not ln.endswith(" / 1") and "NEMO" not in ln]
            if lines:
                assert lines[-1] != "Tall rows" and lines[-1].split() != ["Item", "Answer"], (filler, lines[-3:])
        joined = "\n".join(pages)
        assert "Tall rows" in joined


def test_html_table_headers_keep_their_words_whole():
    doc = ReportDocument(kind="single", title="t", subtitle="", generated_at="", sections=[
        Section("S", "s", [Table(["Generator", "Competency before", "After"], [["a", "b", "c"]],
                                 widths=[0.5, 0.5, 9])])])
    html = render_html(doc)
    assert '<table class="words">' in html
    assert "thead th { background: #f1f4f7; overflow-wrap: normal; word-break: keep-all;" in html
    assert "table.words { table-layout: auto; }" in html


def test_figure_captions_sit_under_their_images_in_cells_qt_and_browsers_both_lay_out():
    """A <figure> in a flex row put the caption beside its image in the app (Qt's rich text has neither); each
    image and its caption now share one table cell, the caption a block under the image, at most 3 to a row."""
    from html.parser import HTMLParser

    from nemo_desktop.core.reports.document import Figures
    from nemo_desktop.core.reports.sections.competency_charts import parts_chart

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.stack, self.in_figs, self.cap = [], [], False, None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "table" and a.get("class") == "figs":
                self.in_figs = True
            elif self.in_figs and tag == "tr":
                self.rows.append([])
            elif self.in_figs and tag == "td":
                self.rows[-1].append([])
            elif self.in_figs and tag == "img":
                self.rows[-1][-1].append(("img", int(a["width"]), a["alt"]))
            elif self.in_figs and tag == "div" and a.get("class") == "figcaption":
                self.cap = ""

        def handle_data(self, data):
            if self.cap is not None:
                self.cap += data

        def handle_endtag(self, tag):
            if tag == "div" and self.cap is not None:
                self.rows[-1][-1].append(("caption", self.cap))
                self.cap = None
            elif tag == "table":
                self.in_figs = False

    inputs = [_small_image(64, 2).with_text(f"Input image {k}") for k in range(4)]
    chart = parts_chart(0.42, 0.97, 0.41, 0.9)
    doc = ReportDocument(kind="single", title="t", subtitle="", generated_at="", sections=[
        Section("S", "s", [Figures(inputs), Figures([chart])])])
    html = render_html(doc)
    assert "<figure" not in html and "display: flex" not in html
    parser = Cells()
    parser.feed(html)
    assert [len(r) for r in parser.rows] == [3, 1, 1]  # 4 images: 3 to a row, then 1; the chart alone
    cells = [c for r in parser.rows for c in r]
    expected = [im.caption for im in inputs] + [chart.caption]
    assert [c[1][1] for c in cells] == expected  # each cell: the image, then its own caption under it
    assert all(len(c) == 2 and c[0][0] == "img" and c[1][0] == "caption" for c in cells)
    assert cells[0][1][1] == "Input image 0 (64\u00d764 px, shown \u00d72)"
    assert [c[0][1] for c in cells] == [128] * 4 + [chart.width]  # each at its size: a pixel-font chart is not shrunk
    assert "table.figs td { border: none;" in html


def test_a_histogram_mean_has_the_precision_of_its_axis():
    from nemo_desktop.core.reports.document import Histogram, HistogramSeries
    from nemo_desktop.core.reports.pdf import render_pdf

    competency = Histogram("Competency", "competency", [0, 0.5, 1], [HistogramSeries("All", [1, 9], 10, 0.968)])
    cei = Histogram("CEI", "CEI", [-100, 0, 100], [HistogramSeries("scitx", [1, 2], 3, 12.34)])
    assert competency.mean_text(competency.series[0]) == "mean 0.97"  # was "mean +1.0"
    assert cei.mean_text(cei.series[0]) == "mean +12.3"
    html = render_html(ReportDocument(kind="single", title="t", subtitle="", generated_at="",
                                      sections=[Section("S", "s", [competency])]))
    assert "n = 10, mean 0.97" in html and "+1.0" not in html
    assert render_pdf(ReportDocument(kind="single", title="t", subtitle="", generated_at="",
                                     sections=[Section("S", "s", [competency])])).startswith(b"%PDF")
