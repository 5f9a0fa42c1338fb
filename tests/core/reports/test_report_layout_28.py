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
