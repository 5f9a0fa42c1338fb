"""Issue 43 §7: PDF table headers never break mid-word, a manifest's time stamps print as dates, and a note
shared by every generator of competency-bench is said once."""
from __future__ import annotations

from nemo_desktop.core.reports.document import ReportDocument
from nemo_desktop.core.reports.format import _flatten
from nemo_desktop.core.reports.pdf import PAD, TABLE_PT, _Renderer


def test_pdf_header_words_are_never_cut():
    r = _Renderer(ReportDocument(kind="single", title="t", subtitle="", generated_at="", sections=[]))
    r.pdf.add_page()
    header = ["Generator", "n", "Competency", "LPIPS", "Feature cos", "Latent cos", "FD_clf", "KD", "s / image",
              "Improvement"]
    widths = [4, 1, 0.6, 1, 1, 1, 1, 1, 1, 0.6]
    col_w = r.column_widths(header, widths)
    assert abs(sum(col_w) - r.pdf.epw) < 1e-6
    r.font(TABLE_PT, "B")
    for h, w in zip(header, col_w):
        for word in h.split():
            assert r._wrap(word, w - 2 * PAD) == [word], (h, w)
    # a table whose proportions already fit keeps them
    assert r.column_widths(["a", "b"], [1, 3]) == [r.pdf.epw / 4, 3 * r.pdf.epw / 4]


def test_time_stamps_in_a_manifest_print_as_dates():
    rows = dict(_flatten({"created_at": 1795880000.123, "config": {"seed": 3, "lr": 0.001}, "finished_at": None}))
    assert rows["created_at"].startswith("2026-11-28") or rows["created_at"].startswith("2026-11-29")
    assert "e+09" not in rows["created_at"]
    assert rows["config.seed"] == "3" and rows["config.lr"] == "0.001" and rows["finished_at"] == "—"


def test_a_note_every_generator_shares_is_said_once():
    from nemo_desktop.core.analyses.competency.results import CompetencyBenchResult, GeneratorMetrics
    from nemo_desktop.core.reports import render_html
    from nemo_desktop.core.reports.sections.competency import build_bench_report

    lpips = "LPIPS (alex) is unavailable: its backbone weights are not in /x/alexnet.pth."
    rows = [GeneratorMetrics(m, 4, 2, 0.5, None, 0.9, 0.9, 1.0, 0.1, 0.2, notes=[lpips])
            for m in ("orig", "fgd", "reco", "lgd", "lnn")]
    rows.insert(1, GeneratorMetrics("igd", 4, 0, 0.0, None, None, None, None, None, 0.0,
                                    notes=[lpips, "IGD needs a trained autoencoder."], available=False))
    result = CompetencyBenchResult(rows=rows, feature_space="FD_clf", n_reference=10,
                                   manifest={"n_used": 4, "n_low_competency": 4, "n_images": 20})
    html = render_html(build_bench_report(result, None))
    assert html.count("LPIPS (alex) is unavailable") == 1
    assert "All generators: LPIPS (alex)" in html
    assert "IGD: IGD needs a trained autoencoder." in html
