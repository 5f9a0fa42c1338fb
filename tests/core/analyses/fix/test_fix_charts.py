"""The fix report's charts (issue 29): accuracy before and after on the finding's images and on everything else,
and the per-class changes with the guard's margin, as inline SVG in the HTML (the same SVG drawn in the PDF). The
figures come from the fix's own measuring code (paired bootstrap, guard) on seeded predictions; the charts are
read back from the SVG: their numbers, their bar lengths, their intervals and their n."""
from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from nemo_desktop.core.analyses.fix import measure
from nemo_desktop.core.analyses.fix.result import FixResult
from nemo_desktop.core.reports import render
from nemo_desktop.core.reports.sections import build_result_report
from nemo_desktop.core.reports.svg_charts import LEFT, RIGHT

NS = {"s": "http://www.w3.org/2000/svg"}
NAMES = ["кошка", "one", "<b>two</b>"]  # another script; markup: shown, never obeyed
SENTENCE = 'Red digits <script>alert(1)</script> & "friends"'


def _flip(labels, rng, p_right):
    return np.where(rng.random(len(labels)) < p_right, labels, (labels + 1) % 3)


def _result(margin: float = 1.0) -> FixResult:
    rng = np.random.default_rng(0)
    la, lr = rng.integers(0, 3, 120), rng.integers(0, 3, 450)
    before_a, after_a = _flip(la, rng, 0.4), _flip(la, rng, 0.85)
    before_r = _flip(lr, rng, 0.95)
    after_r = before_r.copy()
    after_r[(lr == 2) & (rng.random(len(lr)) < 0.3)] = 0  # class "<b>two</b>" loses about 30 points
    a = measure.measure_set(la, before_a, after_a, NAMES, resamples=300, seed=0)
    r = measure.measure_set(lr, before_r, after_r, NAMES, resamples=300, seed=7)
    fm = {"result": "f" * 64, "position": 2, "title": "Failure mode 2 of result ffffffffffff", "sentence": SENTENCE,
          "best": "", "holds": True, "images": 40, "held_out_excluded": 3, "missing": 1}
    return FixResult(config={"mode": "head", "data": "edit", "seed": 0}, classifier={"id": "m"},
                     data={"train": 500, "targeted": 40, "affected": 120, "rest": 450,
                           "description": {"failure_mode": fm}},
                     sources=[], trainable={"trainable": 10, "total": 100},
                     training={"epochs": 1, "steps": 8, "best_epoch": 1, "stopped_early": False}, affected=a, rest=r,
                     guard=measure.guard(a, r, margin), saved=None, manifest={})


def _svgs(html: str) -> dict[str, ET.Element]:
    out = {}
    for text in re.findall(r"<svg.*?</svg>", html, re.S):
        root = ET.fromstring(text)  # well-formed: every model string was escaped
        out[root.get("aria-label")] = root
    return out


def _texts(root) -> list[str]:
    return [t.text for t in root.iter("{%s}text" % NS["s"])]


def test_before_after_chart_shows_the_measured_accuracies_with_intervals_and_n():
    result = _result()
    html = render(build_result_report(result, None), "html").decode("utf-8")
    chart = _svgs(html)["Accuracy before and after the fix"]
    width = float(chart.get("width"))
    plot_w = width - LEFT - RIGHT
    rects = {r.get("class"): [] for r in chart.iter("{%s}rect" % NS["s"]) if r.get("class")}
    for r in chart.iter("{%s}rect" % NS["s"]):
        if r.get("class"):
            rects[r.get("class")].append(r)
    whiskers = [w for w in chart.iter("{%s}line" % NS["s"]) if w.get("class") == "ci"]
    texts = _texts(chart)
    for i, o in enumerate((result.affected["overall"], result.rest["overall"])):
        assert f"n = {o['n']}" in texts
        for j, (name, ci) in enumerate((("before", o["before_ci"]), ("after", o["after_ci"]))):
            value = 100 * o[name]
            assert f"{value:.1f}%" in texts
            bar = rects[name][i]
            assert float(bar.get("width")) / plot_w * 100 == pytest.approx(value, abs=0.01)
            tip = bar.find("s:title", NS).text
            assert f"n = {o['n']}" in tip and f"{ci[0]:.1f} to {ci[1]:.1f}%" in tip
            w = whiskers[2 * i + j]
            assert (float(w.get("x1")) - LEFT) / plot_w * 100 == pytest.approx(ci[0], abs=0.01)
            assert (float(w.get("x2")) - LEFT) / plot_w * 100 == pytest.approx(ci[1], abs=0.01)
    assert f"n = {result.affected['overall']['n']}" in texts and "The finding's images" in texts


def test_change_chart_marks_the_margin_and_flags_the_guards_regressions():
    result = _result(margin=1.0)
    g = result.guard
    assert g["verdict"] == "reject-regression" and any(r["set"] == "class <b>two</b>" for r in g["regressions"])
    html = render(build_result_report(result, None), "html").decode("utf-8")
    chart = _svgs(html)["Change on everything else, per class"]
    texts = _texts(chart)
    bars = [r for r in chart.iter("{%s}rect" % NS["s"]) if r.get("class") in ("change", "flagged")]
    tips = {b.find("s:title", NS).text.split(":")[0]: b for b in bars}
    rows = [("Everything else", result.rest["overall"])] + [(f"class {k}", v)
                                                            for k, v in result.rest["per_class"].items()]
    assert set(tips) == {name for name, _ in rows}
    zero = next(ln for ln in chart.iter("{%s}line" % NS["s"]) if ln.get("class") == "zero")
    margin = next(ln for ln in chart.iter("{%s}line" % NS["s"]) if ln.get("class") == "margin")
    x0, xm = float(zero.get("x1")), float(margin.get("x1"))
    per_point = (x0 - xm) / g["margin"]  # the margin line sits at -margin on the same scale as the bars
    flagged = {r["set"] for r in g["regressions"]}
    for name, o in rows:
        bar = tips[name]
        assert f"{o['change']:+.1f} pt" in texts and f"n = {o['n']}" in texts
        drawn = max(abs(o["change"]) * per_point, 0.5)  # a zero change is a hairline, not nothing
        assert float(bar.get("width")) == pytest.approx(drawn, abs=0.02)
        left_end = float(bar.get("x"))
        assert (left_end < x0 - 0.01) == (o["change"] < 0)
        assert (bar.get("class") == "flagged") == (name.lower() in {f.lower() for f in flagged})
    assert f"guard margin \u2212{g['margin']:g} pt" in texts
    # The verdict in words beside the charts, and the class name shown as text, never as markup.
    assert html.count("The guard&#x27;s verdict: Rejected: regression") == 1
    assert "<b>two</b>" not in html and "class &lt;b&gt;two&lt;/b&gt;" in html
    assert "class <b>two</b>" in texts  # the parsed SVG text is the name itself


def test_the_failure_mode_finding_is_shown_escaped_in_html_and_pdf():
    result = _result()
    doc = build_result_report(result, None)
    html = render(doc, "html").decode("utf-8")
    assert "<script>" not in html
    assert "Red digits &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;friends&quot;" in html
    assert "Failure mode 2 of result ffffffffffff" in html
    pdf = render(doc, "pdf")
    assert pdf.startswith(b"%PDF") and len(pdf) > 2000


def test_many_classes_show_the_flagged_and_the_largest_changes_and_say_so():
    from nemo_desktop.core.reports.sections.fix import MAX_CLASS_BARS, change_chart

    result = _result()
    per = {f"c{i}": {"n": 10, "change": float(i - 15), "ci": [i - 20.0, i - 10.0], "before": 0.5, "after": 0.5}
           for i in range(30)}
    result.rest["per_class"] = per
    result.guard = {**result.guard, "regressions": [{"set": "class c14", "change": -1.0, "ci": [-6, -1], "n": 10}]}
    chart = change_chart(result)
    names = [r.label for r in chart.rows[1:]]
    assert len(names) == MAX_CLASS_BARS and "class c14" in names and "class c0" in names and "class c29" in names
    assert "20 of 30 classes shown" in chart.caption
    assert [r.change for r in chart.rows[1:]] == sorted(r.change for r in chart.rows[1:])  # worst first


@pytest.mark.skipif(not shutil.which("pdftotext"), reason="needs poppler's pdftotext")
def test_the_pdf_draws_the_charts_numbers_n_and_class_names(tmp_path):
    result = _result()
    path = tmp_path / "fix.pdf"
    path.write_bytes(render(build_result_report(result, None), "pdf"))
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True,
                          text=True).stdout
    a, r = result.affected["overall"], result.rest["overall"]
    for value in (a["before"], a["after"], r["before"], r["after"]):
        assert f"{100 * value:.1f}%" in text
    assert f"n = {a['n']}" in text and f"n = {r['n']}" in text
    for name, o in result.rest["per_class"].items():
        assert f"class {name}" in text and f"{o['change']:+.1f} pt" in text
    assert "guard margin \u22121 pt" in text
