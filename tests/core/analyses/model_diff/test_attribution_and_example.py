"""Token attribution (seed 002 Figs. 4-5) by leaving each word out and rescoring, and the evaluator's in-context
example, whose attribute must occur in no shipped condition."""
from __future__ import annotations

import json
import re

import pytest

from nemo_desktop.core.analyses.model_diff import ConditionMeasurement, TokenCounter, completeness
from nemo_desktop.core.analyses.model_diff.attribution import attribute, normalise, spans
from nemo_desktop.core.analyses.model_diff.cache import UnitMemo
from nemo_desktop.core.analyses.model_diff.conditions import load_grid
from nemo_desktop.core.analyses.model_diff.prompts import IN_CONTEXT_EXAMPLE, ModelDiffPrompts
from nemo_desktop.core.analyses.model_diff.result import MethodExplanation, ModelDiffResult
from nemo_desktop.core.analyses.model_diff.scoring import ExplanationScorer
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.models.protocols import ModelInfo
from nemo_desktop.core.base.resources import resource_path

STOP = {"a", "an", "the", "with", "of", "on", "in", "images", "image"}


def _shipped_condition_words() -> set[str]:
    words: set[str] = set()
    folder = resource_path("model_diff", "README.md").parent
    files = sorted(folder.glob("*_grid.v*.json")) + sorted(folder.glob("*_captions.v*.json"))
    assert len(files) >= 2  # the CMNIST grid and the gender captions at least
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        texts = [d.get("task_description", "")]
        for a in d.get("attributes", []):
            texts += [a["name"], a.get("describe", ""), *a["values"]]
        texts += [c["text"] for c in d.get("conditions", [])]
        for t in texts:
            words.update(re.findall(r"[a-z]+", t.lower()))
    return words


def test_the_in_context_examples_attribute_occurs_in_no_shipped_condition():
    attribute_text = re.search(r"given the condition: (.*?)\?", IN_CONTEXT_EXAMPLE).group(1)
    content = set(re.findall(r"[a-z]+", attribute_text.lower())) - STOP
    assert content
    assert not content & _shipped_condition_words(), content & _shipped_condition_words()
    cond = load_grid().all_conditions()[0]
    assert IN_CONTEXT_EXAMPLE in ModelDiffPrompts.load().render_evaluate("classifying digits", "x", cond)
    assert "in_context_example" in ModelDiffPrompts.load().versions()  # a changed example changes the keys


class KeywordEvaluator:
    """Answers every question right while the explanation still holds the word 'low', else 'cannot be determined'."""

    info = ModelInfo("test-double:keyword", "test-double", "1")

    def __init__(self, right):
        self.right, self.calls = right, 0

    def chat_batch(self, conversations, **kw):
        out = []
        for conv in conversations:
            self.calls += 1
            t = conv[-1].content[0]
            expl = t.split("Now, let's start the evaluation. Explanation: ")[1].split("\n\nQuestion:")[0]
            cond = t.split("given the condition: ")[-1].split("?")[0]
            out.append(self.right[cond] if "low" in expl.split() else "[3]")
        return out


def _measurements(deltas):
    conds = load_grid().all_conditions()[:len(deltas)]
    return [ConditionMeasurement(c, 10, 0.5 + d / 2, 0.5 - d / 2) for c, d in zip(conds, deltas)]


def test_leaving_out_the_carrying_word_is_what_scores():
    deltas = [-0.5, -0.4, 0.3, 0.0]
    ms = _measurements(deltas)
    right = dict(zip([m.condition.text for m in ms], ["[2]", "[2]", "[1]", "[3]"]))
    ev = KeywordEvaluator(right)
    scorer = ExplanationScorer(ev, ModelDiffPrompts.load(), "classifying digits", UnitMemo(), TokenCounter("words"))
    a = attribute(scorer, "B wins on low digits", ms, JobContext(), max_units=20)
    full = completeness(deltas, [-1, -1, 1, 0]).value
    assert a.units == ["B", "wins", "on", "low", "digits"] and a.words_per_unit == 1
    assert a.delta == pytest.approx([0, 0, 0, full, 0]) and a.completeness == pytest.approx(full)
    assert a.conditions == 4 and a.calls == 4 * 6 and ev.calls == 4 * 6
    assert attribute(scorer, "B wins on low digits", ms, JobContext(), max_units=20) == a
    assert ev.calls == 4 * 6  # a re-run asks nothing: every question is in the scorer's cache
    other = attribute(scorer, "low", ms, JobContext(), max_units=20)
    normalise([a, other])
    assert a.score == [0, 0, 0, 1.0, 0]
    # Fig. 5: one word of five scores above every threshold below 1 -> ratio 0.2, then 0 at 1.0
    assert a.ratio[0] == 0.2 and a.ratio[-1] == 0.0 and a.auc == pytest.approx(19 * 0.2 * 0.05 + 0.1 * 0.05)
    few = attribute(scorer, "B wins on low digits", ms, JobContext(), max_units=2, conditions=3)
    assert few.units == ["B wins on", "low digits"] and few.words_per_unit == 3 and few.conditions == 3
    assert few.delta[0] == 0 and few.delta[1] > 0


def test_spans_bound_the_units():
    assert spans("a b c d e f g", 3) == (["a b c", "d e f", "g"], 3)
    assert spans("a b", 5) == (["a", "b"], 1)
    with pytest.raises(ValueError):
        spans("a", 0)


def test_attribution_round_trips_and_the_report_highlights_it_escaped():
    from nemo_desktop.core.analyses.model_diff.attribution import Attribution
    from nemo_desktop.core.reports import render
    from nemo_desktop.core.reports.sections import build_result_report

    a = Attribution(["Model", "<b>B</b>", "wins"], [0.0, 0.5, -0.1], words_per_unit=1, conditions=4,
                    completeness=0.6, calls=16)
    normalise([a])
    result = ModelDiffResult(explanations=[MethodExplanation("summarization", "Model <b>B</b> wins", None, 10,
                                                             attribution=a)])
    again = ModelDiffResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.explanations[0].attribution == a
    html = render(build_result_report(result, None), "html").decode("utf-8")
    assert 'title="1.00">&lt;b&gt;B&lt;/b&gt;</span>' in html and "<b>B</b>" not in html
    assert "Token attribution: each word was left out in turn" in html
    assert render(build_result_report(result, None), "pdf").startswith(b"%PDF")
