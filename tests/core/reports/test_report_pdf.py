"""The PDF report, rasterised with poppler's pdftoppm: expected page count, no blank page, text present."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from PIL import Image

from nemo_desktop.core.reports import build_run_report, build_single_report, export_report, render_pdf
from nemo_desktop.core.reports.pdf import needs_shaping
from report_fixtures import ARABIC, EMOJI, HEBREW, SCRIPT, make_result, make_run, store_result

needs_poppler = pytest.mark.skipif(
    not (shutil.which("pdftoppm") and shutil.which("pdftotext")),
    reason="pdftoppm/pdftotext missing: install Debian's poppler-utils (the CI script does) to check PDF pages")


def rasterise(pdf_path, out_dir, dpi=30) -> list[Image.Image]:
    subprocess.run(["pdftoppm", "-r", str(dpi), "-gray", "-png", str(pdf_path), str(out_dir / "page")],
                   check=True, capture_output=True, timeout=300)
    return [Image.open(p) for p in sorted(out_dir.glob("page-*.png"), key=lambda p: int(p.stem.split("-")[-1]))]


def page_texts(pdf_path) -> list[str]:
    out = subprocess.run(["pdftotext", "-layout", str(pdf_path), "-"], check=True, capture_output=True,
                         timeout=120).stdout.decode("utf-8")
    return out.split("\f")[:-1]


def declared_pages(data: bytes) -> int:
    """Page objects in the file (fpdf2 writes uncompressed object headers)."""
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", data))


def assert_pages_ok(pdf_path, tmp_path) -> list[str]:
    pages = rasterise(pdf_path, tmp_path)
    texts = page_texts(pdf_path)
    assert len(pages) == len(texts) == declared_pages(pdf_path.read_bytes())
    for i, im in enumerate(pages, start=1):
        body = im.convert("L").crop((0, 0, im.width, int(im.height * 0.92)))  # leave out the footer line
        lo, _ = body.getextrema()
        assert lo < 200, f"page {i} is blank"
        assert f"page {i} of {len(pages)}" in texts[i - 1], f"page {i} lacks its page number"
    return texts


@needs_poppler
def test_run_report_pdf_pages_toc_and_text(store, tmp_path):
    run_id = make_run(store, n_samples=5, methods=("scitx", "cam-mllm"))
    doc = build_run_report(run_id, store)
    out = tmp_path / "run.pdf"
    out.write_bytes(render_pdf(doc))
    texts = assert_pages_ok(out, tmp_path)
    # Cover + contents, summary, then every sample starts on its own page: at least 1 + 1 + 5 pages.
    assert len(texts) >= 7
    assert "Contents" in texts[0] and "Sample 5: img_0004.png" in texts[0]
    # The contents page numbers point at the pages where the samples really start.
    for n in range(1, 6):
        listed = int(re.search(rf"Sample {n}: img_000{n - 1}\.png\s+(\d+)", texts[0]).group(1))
        assert f"Sample {n}: img_000{n - 1}.png" in texts[listed - 1]
    joined = "\n".join(texts)
    for needle in ("Summary", "CEI distribution", "Global explanation", "Index of samples", "Failed or missing items",
                   "Renditions (sketches, cartoons)", "scitx", "cam-mllm", "The MLLM crashed."):
        assert needle in joined


@needs_poppler
def test_single_hostile_pdf_renders_every_string(store, tmp_path):
    r, arts = make_result(1, "scitx", hostile=True)
    key = store_result(store, r, arts)
    out = export_report(key, store, "pdf", tmp_path / "single.pdf")
    texts = assert_pages_ok(out, tmp_path)
    joined = "".join(texts).replace("\n", "")
    assert SCRIPT in joined and "javascript:alert(1)" in joined
    assert "PneumonoultramicroscopicPneumonoultramicroscopic" in joined
    # Hebrew comes out of pdftotext in its logical order, so the glyphs were laid out right to left.
    assert HEBREW.split()[0] in joined or HEBREW.split()[0][::-1] in joined


@needs_poppler
def test_single_report_pdf_without_images_still_renders(store, tmp_path):
    r, _ = make_result(2, "scitx")
    out = tmp_path / "bare.pdf"
    out.write_bytes(render_pdf(build_single_report(r, store)))  # not stored: no artifacts at all
    assert_pages_ok(out, tmp_path)


def test_pdf_is_produced_without_poppler(store):
    r, arts = make_result(3, "scitx")
    data = render_pdf(build_single_report(store_result(store, r, arts), store))
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF") and declared_pages(data) >= 2


def test_shaping_is_used_only_where_needed():
    assert not needs_shaping("plain text <script>") and not needs_shaping("caf\u00e9 \u00fc") and not needs_shaping(EMOJI)
    assert needs_shaping(ARABIC) and needs_shaping(HEBREW) and needs_shaping("e\u0301")


def test_characters_without_any_font_become_replacement_marks(store, monkeypatch):
    from nemo_desktop.core.reports import fonts

    plan = fonts.plan_fonts(["cat " + EMOJI], candidates=())
    cleaned = plan.clean("cat " + EMOJI + "\x00\x07 end\tx")
    assert "\ufffd" in cleaned and "\u200d" in cleaned  # the joiner needs no glyph of its own
    assert "\x00" not in cleaned and "\x07" not in cleaned and cleaned.endswith(" end x")
    assert plan.clean(ARABIC + HEBREW) == ARABIC + HEBREW  # DejaVu covers both
    monkeypatch.setattr(fonts, "SYSTEM_FALLBACKS", ())
    r, arts = make_result(1, "scitx", hostile=True)
    data = render_pdf(build_single_report(store_result(store, r, arts), store))
    assert data.startswith(b"%PDF-") and declared_pages(data) > 1


def test_pdf_rendering_reports_progress_and_can_be_cancelled(store):
    from nemo_desktop.core.base.errors import JobCancelled
    from nemo_desktop.core.base.job_context import CancelToken, JobContext

    run_id = make_run(store, n_samples=3, methods=("scitx",))
    doc = build_run_report(run_id, store)
    seen = []
    render_pdf(doc, ctx=JobContext(on_progress=seen.append))
    assert seen[-1].stage == "Rendering PDF" and seen[-1].done == seen[-1].total == len(doc.sections)
    token = CancelToken()
    token.cancel()
    with pytest.raises(JobCancelled):
        render_pdf(doc, ctx=JobContext(cancel=token))


@needs_poppler
def test_page_total_placeholder_cannot_come_from_model_text(store, tmp_path):
    r, arts = make_result(6, "scitx")
    r.explanation = "Literal {nb} and \ue000nbp\ue000 stay text."
    out = export_report(store_result(store, r, arts), store, "pdf", tmp_path / "alias.pdf")
    joined = "".join(assert_pages_ok(out, tmp_path))
    assert "Literal {nb} and" in joined and "nbp" in joined


@needs_poppler
def test_contents_over_several_pages_keep_page_numbers_right(tmp_path):
    from nemo_desktop.core.reports.model import Paragraph, ReportDocument, Section

    n = 130  # more entries than one contents page holds
    doc = ReportDocument("run", "Many sections", "", "now",
                         [Section(f"Part {i}", f"p{i}", [Paragraph(f"body of part {i}")], new_page=True)
                          for i in range(n)])
    out = tmp_path / "toc.pdf"
    out.write_bytes(render_pdf(doc))
    texts = assert_pages_ok(out, tmp_path)
    toc_pages = len(texts) - n
    assert toc_pages >= 3
    listed = {int(m.group(1)): int(m.group(2))
              for t in texts[:toc_pages] for m in re.finditer(r"Part (\d+)\s+(\d+)", t)}
    assert len(listed) == n
    for i, page in listed.items():
        assert texts[page - 1].lstrip().startswith(f"Part {i}\n") or f"Part {i}\n" in texts[page - 1]
        assert f"body of part {i}" in texts[page - 1]


@needs_poppler
def test_candidate_blocks_are_not_split_across_pages(store, tmp_path):
    r, arts = make_result(7, "scitx", n_candidates=6)
    key = store_result(store, r, arts)
    out = tmp_path / "single.pdf"
    out.write_bytes(render_pdf(build_single_report(key, store)))
    texts = assert_pages_ok(out, tmp_path)
    for i in range(1, 7):
        starts = [p for p, t in enumerate(texts) if re.search(rf"Candidate {i}\b", t) and "Top-5 before" in t]
        title_pages = [p for p, t in enumerate(texts) if re.search(rf"\bCandidate {i}( \(selected\))?: CEI", t)]
        assert title_pages and starts and title_pages[0] in starts, f"candidate {i} is split over pages"
