"""Failure modes in words and in the report: each hard cluster as a sentence with its evidence, said plainly when it
does not hold up; the report of a real result (digits ink world) renders to HTML and PDF with thumbnails and
escapes the sentences (which come from files or an LLM)."""
from __future__ import annotations

import json

import pytest

from fm_digits_world import sentence_file
from nemo_desktop.core.analyses.failure_modes import AttributeRelevance, FailureModesConfig, FailureModesPipeline
from nemo_desktop.core.analyses.failure_modes.describe import describe_cluster, holds_up
from nemo_desktop.core.analyses.failure_modes.result import GroupResult, HardCluster
from nemo_desktop.core.reports import render
from nemo_desktop.core.reports.document import Figures, Paragraph
from nemo_desktop.core.reports.sections import build_result_report


def _cluster(size=10, accuracy=0.2, picks=(("a photo at night", 0.3, 0.1),), cid=0):
    return HardCluster(id=cid, size=size, accuracy=accuracy, severity=None, mean_score=None, rows=list(range(size)),
                       paths=[f"/d/{i}.png" for i in range(size)], nearest_rows=[0],
                       confusions=[{"true": "cat", "pred": "dog", "count": 4}], nearest_easy=0, easy_similarity=0.9,
                       sentences={"fpdiff": [{"index": i, "text": t, "v_h": vh, "v_e": ve, "d": vh - ve}
                                             for i, (t, vh, ve) in enumerate(picks)]})


def _group(clusters, accuracy=0.8, evaluation=None, class_index=None):
    return GroupResult(name="all" if class_index is None else "cat", class_index=class_index, size=200,
                       accuracy=accuracy, split={}, tau=0.25, tau_source="config", hard_clusters=clusters,
                       easy_clusters=[], retrieved={}, evaluation=evaluation)


def test_a_failure_mode_is_one_sentence_with_its_evidence():
    c = _cluster()
    t = describe_cluster(c, _group([c]), 1, ["tops", "fpdiff"])
    assert t.holds and t.sentence.startswith("Failure mode 1: 10 images, error rate 80% against 20% over the 200")
    assert "described (FPDiff) as \u201ca photo at night\u201d" in t.sentence and "cat \u2192 dog (4)" in t.sentence
    per_class = describe_cluster(c, _group([c], class_index=3), 2, ["fpdiff"])
    assert per_class.sentence.startswith("Failure mode 2 in class \u201ccat\u201d: 10 images")


@pytest.mark.parametrize("size, accuracy, reason", [
    (3, 0.0, "only 3 images, too few"),
    (40, 0.85, "its error rate (15%) is not above its set's (20%)"),
])
def test_a_cluster_that_does_not_hold_up_is_said_plainly(size, accuracy, reason):
    c = _cluster(size=size, accuracy=accuracy)
    ok, why = holds_up(c, _group([c]))
    assert not ok and why.startswith(reason)
    t = describe_cluster(c, _group([c]), 4, ["fpdiff"])
    assert t.sentence.startswith("Hard cluster 4 did not hold up as a failure mode: " + reason)
    assert "do not describe a failure" in t.sentence


def test_sentences_that_do_not_set_the_cluster_apart_are_flagged():
    c = _cluster(picks=(("a photo at night", 0.2, 0.3), ("a snowy road", 0.1, 0.1)))
    assert "d <= 0" in describe_cluster(c, _group([c]), 1, ["fpdiff"]).sentence
    assert "d <= 0" not in describe_cluster(_cluster(), _group([_cluster()]), 1, ["fpdiff"]).sentence


def test_evaluated_sentences_say_whether_their_images_are_harder():
    c = _cluster(picks=(("a photo at night", 0.3, 0.1), ("a snowy road", 0.3, 0.2)))
    g = _group([c], evaluation={"ground_truth": {"hard_sentences": [1]}, "methods": {}})
    s = describe_cluster(c, g, 1, ["fpdiff"]).sentence
    assert "\u201ca photo at night\u201d (not confirmed), \u201ca snowy road\u201d (confirmed)" in s


def _fallen_result():
    from nemo_desktop.core.analyses.failure_modes.result import FailureModesResult

    c = _cluster(picks=(("a photo at night", 0.3, 0.1), ("a <i>snowy</i> road", 0.2, 0.2)))
    c.sentences["fpdiff"][1]["padded"] = True
    c.tau_fallback, c.tau_padded = {"fpdiff": True}, {"fpdiff": 1}
    g = _group([c])
    g.tau, g.tau_source = 0.312, "auto"
    return FailureModesResult(config={"methods": ["fpdiff"], "k": 2, "relevance": "attributes", "p_at_k": 10},
                              index={"rows": 200}, sentences=[], groups=[g],
                              evaluation={"fpdiff": {"ahr": 0.5, "acr": 0.4, "tpr": 1.0, "ji": 0.5, "ahr_n": 1,
                                                     "acr_n": 1, "tpr_n": 1, "ji_n": 1}},
                              manifest={}, p_at_k={"k": 10, "value": 0.625, "n": 1})


def test_a_tau_fallback_is_said_per_cluster_in_words_text_output_and_report():
    from nemo_desktop.cli.commands.failure_modes import format_result

    res = _fallen_result()
    c, g = res.groups[0].hard_clusters[0], res.groups[0]
    said = describe_cluster(c, g, 1, ["fpdiff"]).sentence
    assert "“a <i>snowy</i> road” (TopS padding)" in said
    assert "FPDiff fell back: 1 of its 2 sentences passed tau = 0.312 (automatic); the other 1 is TopS's" in said
    assert "FPDiff fell back" in format_result(res)
    doc = build_result_report(res, None)
    mode = [s for s in doc.sections if s.title == "Whole dataset"][0].children[0]
    assert any(isinstance(b, Paragraph) and b.style == "warning" and "FPDiff fell back" in b.text for b in mode.blocks)
    table = [b for b in mode.blocks if hasattr(b, "rows")][-1]
    assert [r[0] for r in table.rows] == ["FPDiff", "FPDiff (TopS padding)"]
    html = render(doc, "html").decode("utf-8")
    assert "FPDiff fell back" in html and "<i>snowy</i>" not in html


def test_p_at_k_is_reported_with_the_other_metrics():
    from nemo_desktop.cli.commands.failure_modes import format_result

    res = _fallen_result()
    assert "P@10 0.625 (macro over 1 set(s)" in format_result(res)
    doc = build_result_report(res, None)
    (ev,) = [s for s in doc.sections if s.anchor == "evaluation"]
    html = render(doc, "html").decode("utf-8")
    assert "P@10 of the clusters" in html and "0.625" in html
    assert _roundtrip(res).p_at_k == res.p_at_k


def test_the_vqa_questions_asked_are_shown_escaped():
    res = _fallen_result()
    res.config.update(relevance="vqa", vqa_question="per-sentence")
    res.manifest["relevance"] = {"source": "vqa", "question": "per-sentence", "question_writer": {"id": "llm-x"},
                                 "questions": {"a photo at night": "Was the <b>image</b> taken at night?"},
                                 "question_fallbacks": ["a snowy road"]}
    html = render(build_result_report(res, None), "html").decode("utf-8")
    assert "Was the &lt;b&gt;image&lt;/b&gt; taken at night?" in html and "<b>image</b>" not in html
    assert "written once by llm-x" in html and "asked with the fixed template instead" in html
    assert "VQA question" in html
    from nemo_desktop.cli.commands.failure_modes import format_result

    text = format_result(res)
    assert "VQA relevance asked each sentence its own question, written by llm-x:" in text
    assert '"a photo at night" -> Was the <b>image</b> taken at night?' in text  # plain text: nothing to escape
    assert 'no readable question for "a snowy road"' in text


def _roundtrip(res):
    from nemo_desktop.core.analyses.failure_modes.result import FailureModesResult

    return FailureModesResult.from_dict(res.to_dict())


@pytest.fixture
def result(ink_world, ink_manifest, tmp_path):
    clf, index, embedder, store = ink_world
    path = sentence_file(tmp_path / "s.json")
    doc = json.loads(path.read_text())
    doc["sentences"].append({"text": "<script>alert(1)</script> a digit in blue ink", "requires": {"ink": "blue"}})
    path.write_text(json.dumps(doc))
    cfg = FailureModesConfig(clusters=5, tau=None, sentence_sets=(str(path),), relevance="attributes",
                             split="correctness", nearest_members=4)
    return FailureModesPipeline(clf, embedder, store, cfg, AttributeRelevance(ink_manifest))(index), store


def test_report_renders_modes_with_thumbnails_and_escapes_sentences(result):
    res, store = result
    doc = build_result_report(res, store)
    assert doc.title.startswith("Where does") and doc.sections[0].title == "Failure modes"
    summary = [b for b in doc.sections[0].blocks if isinstance(b, Paragraph)]
    assert len(summary) >= len(res.groups[0].hard_clusters)
    assert any(b.text.startswith("Failure mode 1") for b in summary)
    clusters = [s for s in doc.sections if s.title == "Whole dataset"][0].children
    assert len(clusters) == len(res.groups[0].hard_clusters)
    figs = [b for b in clusters[0].blocks if isinstance(b, Figures)]
    assert figs and 1 <= len(figs[0].images) <= 4  # the nearest images (nearest_members=4)
    assert [s.title for s in doc.sections if s.title == "Evaluation"]
    html = render(doc, "html").decode("utf-8")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("data:image/png;base64,") >= len(figs[0].images)
    pdf = render(doc, "pdf")
    assert pdf.startswith(b"%PDF") and len(pdf) > 5000


def test_the_cei_validation_section_gives_each_sentences_figures_escaped_in_html_and_pdf():
    from nemo_desktop.core.analyses.failure_modes.result import FailureModesResult
    from nemo_desktop.core.analyses.failure_modes.validate import ModeValidation

    c = _cluster(picks=(("a <b>night</b> photo", 0.3, 0.1),))
    held = ModeValidation("all", 1, "fpdiff", "a <b>night</b> photo", 3, 4, 42.0, True, "\u201ca <b>night</b> "
                          "photo\u201d held up under CEI: ...")
    weak = ModeValidation("all", 1, "fpdiff", "a snowy road", 2, 4, 1.5, False, "\u201ca snowy road\u201d did not hold "
                          "up under CEI: removing it ... +1.5 points on average (it must rise by more than 5)")
    result = FailureModesResult(config={"methods": ["fpdiff"], "k": 1}, index={"rows": 200}, sentences=[],
                                groups=[_group([c])], evaluation=None, manifest={},
                                cei_validation={"settings": {"method": "fpdiff", "max_images": 4, "threshold": 5.0},
                                                "validations": [held.to_dict(), weak.to_dict()],
                                                "notes": ["Hard cluster 2 was not validated: it did not hold up."]})
    doc = build_result_report(result, None)
    (cei,) = [s for s in doc.sections if s.anchor == "cei"]
    (table,) = [b for b in cei.blocks if hasattr(b, "rows")]
    assert table.header == ["Mode", "Method", "Sentence", "n / tried", "Mean CEI", "Held up?"]
    assert [r[3] for r in table.rows] == ["3 / 4", "2 / 4"] and [r[5] for r in table.rows] == ["yes", "did not hold up"]
    said = [b.text for b in cei.blocks if isinstance(b, Paragraph)]
    assert any("did not hold up" in t for t in said) and any("was not validated" in t for t in said)
    html = render(doc, "html").decode("utf-8")
    assert "CEI validation of the sentences" in html and "a &lt;b&gt;night&lt;/b&gt; photo" in html
    assert "<b>night</b>" not in html
    assert render(doc, "pdf").startswith(b"%PDF")
    assert FailureModesResult.from_dict(result.to_dict()).cei_validation == result.cei_validation
