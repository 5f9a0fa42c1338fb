"""The model-difference report section on a hand-made result: every score a sentence with its n, failures and
explanations that did not hold up said plainly, model text escaped, the difference grid, HTML and PDF."""
from __future__ import annotations

from nemo_desktop.core.analyses.model_diff import (ConditionMeasurement, ExplanationScore, MethodExplanation,
                                                   ModelDiffResult, load_grid)
from nemo_desktop.core.analyses.model_diff.result import Evidence
from nemo_desktop.core.reports import render
from nemo_desktop.core.reports.sections import build_result_report


def _result() -> ModelDiffResult:
    grid = load_grid()
    test = [ConditionMeasurement(grid.make({"digit": d, "color": c, "angle": 0}), 20, acc, 1.0 - acc)
            for d, c, acc in [(3, "red", 0.9), (3, "green", 0.1), (7, "red", 0.6), (7, "green", 0.5)]]
    good = ExplanationScore(completeness=0.66, n=4, tokens=61, density=0.28, unparsed=1)
    bad = ExplanationScore(completeness=-0.2, n=4, tokens=12, density=0.0)
    undefined = ExplanationScore(completeness=0.0, n=4, tokens=9, density=0.0, completeness_undefined=True)
    return ModelDiffResult(
        explanations=[MethodExplanation("raw-differences", "\n".join(m.line() for m in test), undefined, 4),
                      MethodExplanation("summarization", "", None, 4, error="The model's reply contains no JSON."),
                      MethodExplanation("optimization", "Model A <script>alert(1)</script> wins on red 3s.", good, 9),
                      MethodExplanation("user", "Model B is better everywhere.", bad, 0)],
        test=test, evidence=[Evidence(test[1].condition.to_dict(), test[1].condition.text, 20, 0.1, 0.9)],
        manifest={"model_a": {"id": "vit-a"}, "model_b": {"id": "vit-b"}, "generator": {"source": "synthetic-digits"},
                  "condition_space": "cmnist/v1", "evaluator": {"id": "judge"}},
        result_key="k" * 64)


def test_sentences_failures_escaping_and_grid():
    doc = build_result_report(_result(), None)
    html = render(doc, "html").decode("utf-8")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Completeness +0.66 (Pearson correlation over 4 held-out conditions), Density +0.28, 61 tokens." in html
    assert "could not be read for 1 of 4 questions" in html
    assert "Summarization produced no explanation: The model&#x27;s reply contains no JSON." in html
    assert html.count("This explanation did not hold up") == 2  # the undefined one and the negative one
    assert "Completeness is undefined on 4 held-out conditions" in html
    assert "Under \u201cdigit=3, color=green, angle=0\u201d model B is more accurate: model A classifies 10% and " \
           "model B 90% of n = 20 images correctly." in html
    assert "Accuracy of A minus B per digit and color" in html and "+0.80" in html and "-0.80" in html
    assert render(doc, "pdf").startswith(b"%PDF")
