"""Hand-computed metric cases, answer parsing, word drops and the seed's token counts."""
from __future__ import annotations

import pytest

from nemo_desktop.core.analyses.model_diff import (ConditionMeasurement, TokenCounter, completeness,
                                                   default_token_counter, drop_words, load_grid, parse_answer,
                                                   words_to_drop)
from nemo_desktop.core.analyses.model_diff.cache import UnitMemo
from nemo_desktop.core.analyses.model_diff.prompts import ModelDiffPrompts
from nemo_desktop.core.analyses.model_diff.scoring import ExplanationScorer
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.models.protocols import ModelInfo


def test_completeness_hand_value_and_undefined_cases():
    assert completeness([0.5, -0.5, 0, 0.25], [1, -1, 0, 0]).value == pytest.approx(0.956183, abs=1e-6)
    const = completeness([0.5, -0.5, 0.1], [1, 1, 1])
    assert const.value == 0.0 and const.undefined and const.n == 3
    assert completeness([0.2, 0.2], [1, -1]).undefined
    assert completeness([0.5, -0.5], [-1, 1]).value == pytest.approx(-1.0)


@pytest.mark.parametrize("reply, value", [
    ("[1]", 1), ("1", 1), ("Model A", 1), ("**Model B**", -1), ("[2] Model B", -1), ("cannot be determined", 0),
    ("[3] Cannot be determined", 0), ("The answer is [1] Model A because ...", 1), ("banana", None), ("", None),
    (None, None), ("Model A or Model B", None)])
def test_answer_parsing(reply, value):
    assert parse_answer(reply) == value


def test_words_to_drop_and_drop_is_seeded_per_condition():
    assert [words_to_drop(w) for w in (1, 2, 4, 6, 54)] == [0, 1, 1, 2, 14]
    text = " ".join(f"w{i}" for i in range(54))
    a = drop_words(text, ratio=0.25, seed=0, condition_id="c1")
    assert a == drop_words(text, ratio=0.25, seed=0, condition_id="c1")
    assert len(a.split()) == 40
    kept = [int(w[1:]) for w in a.split()]
    assert kept == sorted(kept)  # order kept
    assert a != drop_words(text, ratio=0.25, seed=0, condition_id="c2")
    assert a != drop_words(text, ratio=0.25, seed=1, condition_id="c1")


HUMAN_2 = ("Model A is worse than model B when the digits of 0, 1, 2, 3, and 4 are not colored in red regardless of "
           "the rotation angle. Model B is worse than model A when the digits of 5, 6, 7, 8, and 9 are not colored "
           "in blue regardless of the rotation angle.")
SUMM_LLAMA = ("Model A performs well when the digit is 9, color is magenta or grey, and angle is within a certain "
              "range. However, Model A struggles with digits 0, 4, and 2, especially when the color is yellow, green, "
              "or cyan, and the angle is outside of a specific range. Model B performs better with digits 0, 4, and 2 "
              "in various color and angle combinations, but its accuracy drops when the digit is 9, color is magenta "
              "or grey, and angle is within a specific range. Both models have strengths and weaknesses, and their "
              "performance varies depending on the input conditions.")
OPT_LLAMA = ("Model A and Model B show varied performance under different conditions. While A underperforms with "
             "digit 1 and certain angles, it outperforms with digits 5, 6, 7, and 8. Model B shows relative "
             "stability with certain digits and conditions but underperforms with others.")
OPT_PHI = ("Model A excels with digits 9 and 7 in specific conditions, while Model B outperforms with digits 4, 0, 1, "
           "2, 3, and 5 in various colors and angles. Model A also excels with digit 8 in orange at -30 degrees and "
           "digit 6 in orange at 5 degrees.")


def test_token_length_reproduces_the_seed_table():
    counter = default_token_counter()
    if counter.approximate:
        pytest.skip("no o200k_base backend installed (pip install bpe-openai)")
    assert [counter.count(t) for t in (HUMAN_2, SUMM_LLAMA, OPT_LLAMA, OPT_PHI)] == [74, 130, 61, 71]
    assert TokenCounter("words").count("a b c") == 3 and TokenCounter("words").approximate


class LookupEvaluator:
    """Answers from a table of exact explanation texts (what the word drop leaves decides the answer)."""

    info = ModelInfo("test-double:lookup", "test-double", "1")

    def __init__(self, table):
        self.table, self.calls = table, 0

    def chat_batch(self, conversations, **kw):
        out = []
        for conv in conversations:
            self.calls += 1
            text = conv[-1].content[0]
            expl = text.split("Now, let's start the evaluation. Explanation: ")[1].split("\n\nQuestion:")[0]
            out.append(self.table.get(expl, "[3]"))
        return out


def _measurements(deltas):
    grid = load_grid()
    conds = grid.all_conditions()[:len(deltas)]
    return [ConditionMeasurement(c, 10, 0.5 + d / 2, 0.5 - d / 2) for c, d in zip(conds, deltas)]


def test_constant_answers_make_completeness_undefined_not_hidden():
    ms = _measurements([-0.5, -0.4, 0.3, 0.0])
    scorer = ExplanationScorer(LookupEvaluator({}), ModelDiffPrompts.load(), "classifying digits", UnitMemo(),
                               TokenCounter("words"))
    score = scorer.score("anything at all here", ms, JobContext())
    assert score.completeness == 0.0 and score.completeness_undefined and score.density_undefined


def test_density_from_a_lookup_evaluator_matches_the_hand_value():
    text = "B wins when low"
    deltas = [-0.5, -0.4, 0.3, 0.0]
    ms = _measurements(deltas)
    dropped = [drop_words(text, ratio=0.25, seed=0, condition_id=m.condition.id) for m in ms]

    class PerCondition(LookupEvaluator):
        def chat_batch(self, conversations, **kw):
            out = []
            for conv in conversations:
                self.calls += 1
                t = conv[-1].content[0]
                expl = t.split("Explanation: ")[-1].split("\n\nQuestion:")[0]
                cond = t.split("given the condition: ")[-1].split("?")[0]
                i = [m.condition.text for m in ms].index(cond)
                if expl == text:  # the full text: right on the two B-cells, wrong on the A-cell
                    out.append(["[2]", "[2]", "[2]", "[3]"][i])
                else:  # dropped copies: right everywhere (the dropped word misled) -> negative Density
                    out.append(["[2]", "[2]", "[1]", "[3]"][i])
            return out

    ev = PerCondition({})
    scorer = ExplanationScorer(ev, ModelDiffPrompts.load(), "classifying digits", UnitMemo(), TokenCounter("words"))
    score = scorer.score(text, ms, JobContext())
    full = completeness(deltas, [-1, -1, -1, 0]).value
    drop = completeness(deltas, [-1, -1, 1, 0]).value
    assert score.completeness == pytest.approx(full)
    assert score.density == pytest.approx(full - drop) and score.density < 0
    assert score.tokens == 4 and score.n == 4 and len(set(dropped)) >= 2
    calls = ev.calls
    scorer.score(text, ms, JobContext())  # cached: no new evaluator call
    assert ev.calls == calls == 8
