"""LLM Match: reading scores out of messy judge replies, retries, recorded failures, caching."""
from __future__ import annotations

import pytest

from nemo_desktop.core.benchmark.judge import (LLMMatchJudge, Verdict, coerce_score, custom_criterion, llm_match,
                                               load_criterion, parse_judge_score)
from nemo_desktop.core.base.errors import ConfigError, MalformedOutputError
from nemo_desktop.core.methods.prompts import load_prompt
from nemo_desktop.core.models.protocols import ModelInfo

READABLE = [
    ('{"reasoning": "It names the cartoon style.", "score": 1.0}', 1.0),
    ('```json\n{\n "reasoning": "partial",\n "score": 0.5\n}\n```', 0.5),
    ("Sure! Here is my evaluation.\n```json\n{\"reasoning\": \"no\", \"score\": 0}\n```\nHope this helps.", 0.0),
    ("The explanation mentions the background. {'reasoning': 'background named', 'score': 1,}", 1.0),
    ('{"reasoning": "vague", "score": "0.5/1"}', 0.5),
    ('{"Score": "1.0 (full description)"}', 1.0),
    ('{"result": {"reasoning": "nested", "score": 0.5}}', 0.5),
    ('{"reasoning": "cut off by the token limit", "score": 0.5', 0.5),
    ("0.5/1", 0.5),
    ("**Score: 0.5**\nThe explanation only hints at the viewpoint.", 0.5),
    ("I'd score it 1/2 because the rotation is mentioned in passing.", 0.5),
    ("Final score = 10/10", 1.0),
    ("Score: 50%", 0.5),
    ("```\n1\n```", 1.0),
    ("partial", 0.5),
    ("  \"0.0\"  ", 0.0),
    ("Score: 1.0. Reasoning: the style is named. Score: 1", 1.0),  # repeated, agreeing
    ("{“reasoning”: “typographic quotes”, “score”: 1.0}", 1.0),
]

UNREADABLE = [
    "",
    "   ",
    "The explanation is good.",
    '{"reasoning": "out of range", "score": 2}',
    '{"reasoning": "negative", "score": -1}',
    '{"reasoning": "between", "score": 0.75}',
    '{"reasoning": "ten-point scale", "score": 8}',
    '{"reasoning": "nothing", "score": null}',
    '{"reasoning": "bool", "score": true}',
    '{"reasoning": "missing the field"}',
    "Score: 3/4",
    "Score: 1.5",
    "Score: 1.0 ... on reflection, score: 0.0",  # conflicting
    '{"score": "high"}',
    '{"score": "1/0"}',
    "I think it deserves a 1.0 because it is thorough and well written overall, but not sure.",
]


@pytest.mark.parametrize("reply,expected", READABLE)
def test_messy_replies_with_one_score_are_read(reply, expected):
    assert parse_judge_score(reply) == expected


@pytest.mark.parametrize("reply", UNREADABLE)
def test_replies_without_one_allowed_score_are_rejected(reply):
    with pytest.raises(MalformedOutputError):
        parse_judge_score(reply)


def test_coerce_never_rounds_or_clips():
    assert coerce_score(1) == 1.0 and coerce_score("0.5") == 0.5 and coerce_score("none") == 0.0
    for bad in (0.49, 1.01, float("nan"), float("inf"), "1e9", [1.0]):
        with pytest.raises(MalformedOutputError):
            coerce_score(bad)


def test_criteria_are_the_papers_factors():
    assert "artistic style or rendition" in load_criterion("imagenet-r").factor
    on = load_criterion("objectnet").factor
    assert "viewpoint" in on and "rotation" in on and "background" in on
    d = load_criterion("imagenet-d").factor
    assert "background" in d and "texture" in d and "material" in d
    with pytest.raises(ConfigError):
        load_criterion("mnist")
    assert custom_criterion("Mine", "  the   lighting ").factor == "the lighting"


class Replies:
    """MLLM double answering from a list of replies (or raising an exception instance)."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.info = ModelInfo("test-double:replies", "test-double", "1")
        self.seen = []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        self.seen.append(messages)
        assert temperature == 0.0
        r = self.replies.pop(0)
        if isinstance(r, Exception):
            raise r
        return r


def test_prompt_is_versioned_and_filled_with_the_criterion(store):
    tpl = load_prompt("llm_match_judge")
    assert tpl.version.startswith("llm_match_judge/v1+")
    assert tpl.placeholders == {"dataset_name", "criterion", "explanation"}
    mllm = Replies(['{"score": 1.0}'])
    v = LLMMatchJudge(mllm, "GPT", store=store).judge("It is a cartoon.", load_criterion("imagenet-r"))
    text = mllm.seen[0][0].content[0]
    assert "artistic style or rendition" in text and "It is a cartoon." in text and "1.0, 0.5 or 0.0" in text
    assert v.status == "scored" and v.score == 1.0 and v.prompt_version == tpl.version


def test_unreadable_reply_is_retried_then_scored(store):
    mllm = Replies(["I like it.", '```json\n{"score": 0.5}\n```'])
    v = LLMMatchJudge(mllm, "J", store=store).judge("The pose is odd.", load_criterion("objectnet"))
    assert v.status == "scored" and v.score == 0.5 and len(v.replies) == 2 and len(v.errors) == 1
    repair = mllm.seen[1]
    assert [m.role for m in repair] == ["user", "assistant", "user"] and '"score"' in repair[-1].content[0]


def test_persistently_unreadable_reply_is_a_recorded_failure_never_a_score(store):
    crit = load_criterion("imagenet-d")
    mllm = Replies(['{"score": 0.75}', "Score: 2", "dunno"])
    judge = LLMMatchJudge(mllm, "J", store=store, max_attempts=3)
    v = judge.judge("The texture is wooden.", crit)
    assert v.status == "failed" and v.score is None
    assert v.replies == ['{"score": 0.75}', "Score: 2", "dunno"] and len(v.errors) == 3
    stored = store.get(v.key)
    assert stored.kind == "llm-match" and stored.payload["status"] == "failed" and stored.payload["score"] is None
    assert stored.payload["replies"] == v.replies  # raw replies are kept
    # Recorded: asking again is answered from the store (no new model call).
    again = LLMMatchJudge(Replies([]), "J", store=store, max_attempts=3)
    again.mllm.info = mllm.info
    assert again.judge("The texture is wooden.", crit).status == "failed"
    assert llm_match([v]) is None


def test_model_errors_propagate_and_are_not_stored(store):
    judge = LLMMatchJudge(Replies([ConnectionError("endpoint down")]), "J", store=store)
    crit = load_criterion("imagenet-r")
    with pytest.raises(ConnectionError):
        judge.judge("A sketch.", crit)
    assert not store.has(judge.key_for("A sketch.", crit))


def test_cache_key_covers_explanation_criterion_and_model(store):
    judge = LLMMatchJudge(Replies([]), "J", store=store)
    a = judge.key_for("x", load_criterion("imagenet-r"))
    assert a != judge.key_for("y", load_criterion("imagenet-r"))
    assert a != judge.key_for("x", load_criterion("objectnet"))
    other = LLMMatchJudge(Replies([]), "J", store=store)
    other.mllm.info = ModelInfo("test-double:other", "test-double", "1")
    assert a != other.key_for("x", load_criterion("imagenet-r"))
    with pytest.raises(ValueError):
        judge.judge("  ", load_criterion("imagenet-r"))


def test_llm_match_averages_the_judges_that_scored():
    vs = [Verdict("a", {}, 1.0, "scored"), Verdict("b", {}, 0.5, "scored"), Verdict("c", {}, None, "failed")]
    assert llm_match(vs) == 0.75
    assert Verdict.from_dict(vs[0].to_dict()) == vs[0]
