"""Grading explanations with the LLM-Match judge (one criterion per cause) and the keyword tag."""
from __future__ import annotations

import json

import pytest

from nemo_desktop.core.benchmark.competency_grading import (CAUSE_FACTORS, grade_explanation, keyword_causes)
from nemo_desktop.core.benchmark.judge import LLMMatchJudge
from nemo_desktop.core.models.protocols import ModelInfo


class FactorJudgeDouble:
    """Judge test double: scores 1.0 when the explanation (quoted in the prompt) shares a word with the
    criterion's key term, else 0.0. Records the prompts."""

    info = ModelInfo("test-double:factor-judge", "test-double", "1")

    def __init__(self, term: str) -> None:
        self.term, self.prompts = term, []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None):
        text = messages[-1].content[0]
        self.prompts.append(text)
        return json.dumps({"reasoning": "-", "score": 1.0 if text.lower().count(self.term) >= 2 else 0.0})

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


def test_each_cause_has_a_criterion_and_the_judge_sees_it():
    double = FactorJudgeDouble("nois")
    judge = LLMMatchJudge(double)
    v = grade_explanation(judge, "The image is covered in random noise.", "noise", "digits")
    assert v.score == 1.0 and CAUSE_FACTORS["noise"] in double.prompts[0]
    v = grade_explanation(judge, "The digit is drawn with thin strokes.", "noise", "digits")
    assert v.score == 0.0
    assert set(CAUSE_FACTORS) == {"spatial", "brightness", "contrast", "saturation", "noise", "pixelation"}
    with pytest.raises(ValueError, match="unknown cause"):
        grade_explanation(judge, "x", "blur", "digits")


@pytest.mark.parametrize("text,expected", [
    ("The image looks overexposed and too bright.", ["brightness"]),
    ("Grainy speckles and low contrast.", ["contrast", "noise"]),
    ("It is blocky, as if pixelated.", ["pixelation"]),
    ("The colours are washed-out.", ["saturation"]),
    ("An unfamiliar object sits in the corner.", ["spatial"]),
    ("The digit is written in cursive.", []),
])
def test_keyword_tag(text, expected):
    assert keyword_causes(text) == expected


def test_explanation_accuracy_per_condition_with_its_n():
    from nemo_desktop.core.analyses.competency import CompetencyCounterfactualResult, CompetencyScore
    from nemo_desktop.core.analyses.competency.results import CounterfactualOutput
    from nemo_desktop.core.benchmark.competency_grading import explanation_accuracy

    score = CompetencyScore(0.2, 0.5, 0.4, 0.1, 3.0, 1, "one")

    def result(without, reco, lnn):
        return CompetencyCounterfactualResult(
            "sha", score, [CounterfactualOutput("reco", explanation=reco), CounterfactualOutput("lgd"),
                           CounterfactualOutput("lnn", explanation=lnn)], explanation_without=without)

    results = [result("Thin strokes.", "Random noise covers it.", "Noisy pixels."),
               result("The image is noisy.", "Speckled noise.", None),
               result(None, "The digit is slanted.", "Grainy noise everywhere.")]
    judge = LLMMatchJudge(FactorJudgeDouble("nois"))
    rows = {r.condition: r for r in explanation_accuracy(results, "noise", judge, "digits")}
    assert list(rows) == ["original", "reco", "lnn"]  # lgd showed no counterfactual to the MLLM
    assert (rows["original"].n, rows["original"].accuracy) == (2, 0.5)
    assert (rows["reco"].n, rows["reco"].accuracy) == (3, pytest.approx(2 / 3))
    assert (rows["lnn"].n, rows["lnn"].n_scored, rows["lnn"].accuracy) == (2, 2, 1.0)
