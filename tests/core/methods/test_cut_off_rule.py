"""Issue 42 §7: the rule that tells a cut reply from a malformed one (methods/cut_off.py), on replies whose end is
known. A reply that stopped at the token limit is cut off even when no JSON object was opened; a reply that the
model ended itself without JSON is malformed, not cut; a whole object is taken even from a reply that ran on."""
from __future__ import annotations

import pytest

from nemo_desktop.core.methods.cut_off import is_cut_off
from nemo_desktop.core.models.protocols import Reply

FIELD, LIMIT = "cause_of_error", 512


@pytest.mark.parametrize("reply", [
    Reply("The model was looking at the", finish_reason="length"),  # prose, stopped at the limit
    Reply("Sure. Let me think about the background of", completion_tokens=LIMIT),  # finish unknown: limit reached
    Reply('{"cause_of_error": "The mod', finish_reason="stop"),  # stops inside an object it opened
    '{"cause_of_error": "The mod',  # a plain str: the open object alone says it
])
def test_a_reply_cut_at_the_limit_is_cut_off_with_or_without_json(reply):
    assert is_cut_off(reply, FIELD, LIMIT)


@pytest.mark.parametrize("reply", [
    Reply("I cannot answer that.", finish_reason="stop"),  # malformed: the model ended it
    Reply("The model was looking", completion_tokens=LIMIT - 1),  # below the limit
    "No JSON here.",  # a plain str says nothing about the limit
    Reply('{"cause_of_error": "a blue background"} and then more', finish_reason="length"),  # a whole object
])
def test_a_reply_the_model_ended_or_a_whole_object_is_not_cut_off(reply):
    assert not is_cut_off(reply, FIELD, LIMIT)
