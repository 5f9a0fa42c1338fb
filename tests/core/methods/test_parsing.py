"""A corpus of messy MLLM replies: each must yield the requested field, or fail with MalformedOutputError."""
import pytest

from nemo_desktop.core.base.errors import CutOffOutputError, MalformedOutputError
from nemo_desktop.core.methods.parsing import extract_field, extract_json, runs_off_end

CAUSE = "The blue ink resembles the eights in the training set."

READABLE = {
    "plain": '{"cause_of_error": "%s"}' % CAUSE,
    "fenced": 'Sure!\n```json\n{\n "cause_of_error": "%s"\n}\n```\nHope this helps.' % CAUSE,
    "fence_no_lang": '```\n{"cause_of_error": "%s"}\n```' % CAUSE,
    "text_around": 'Here is my analysis: {"cause_of_error": "%s"} Let me know.' % CAUSE,
    "single_quotes": "{'cause_of_error': '%s'}" % CAUSE,
    "single_quotes_apostrophe": "{'cause_of_error': 'The model's colour prior: %s'}" % CAUSE,
    "trailing_comma": '{"cause_of_error": "%s",}' % CAUSE,
    "trailing_comma_nested": '{"a": [1, 2,], "cause_of_error": "%s",\n}' % CAUSE,
    "list_of_objects": '[{"other": 1}, {"cause_of_error": "%s"}]' % CAUSE,
    "nested": '{"answer": {"cause_of_error": "%s"}}' % CAUSE,
    "smart_quotes": "{\u201ccause_of_error\u201d: \u201c%s\u201d}" % CAUSE,
    "hash_comment": '{\n "cause_of_error": "%s" # one sentence\n}' % CAUSE,
    "slash_comment": '{\n // the cause\n "cause_of_error": "%s"\n}' % CAUSE,
    "newline_in_string": '{"cause_of_error": "The blue ink resembles\nthe eights in the training set."}',
    "python_literals": "{'cause_of_error': '%s', 'confident': True, 'other': None}" % CAUSE,
    "json_literals_single": "{'cause_of_error': '%s', 'confident': true}" % CAUSE,
    "key_variant": '{"Cause of Error": "%s"}' % CAUSE,
    "braces_in_prose_before": 'I considered {colour, shape}. {"cause_of_error": "%s"}' % CAUSE,
    "braces_inside_string": '{"cause_of_error": "%s {not a brace problem}"}' % CAUSE,
    "two_fences_second_good": '```python\nprint(1)\n```\n```json\n{"cause_of_error": "%s"}\n```' % CAUSE,
    "unterminated_fence": '```json\n{"cause_of_error": "%s"}' % CAUSE,
    "escaped_quote": '{"cause_of_error": "The \\"blue\\" ink resembles the eights in the training set."}',
    # Shapes the hand-written repair could not read; json-repair does.
    "unquoted_keys": '{cause_of_error: "%s"}' % CAUSE,
    "missing_comma": '{"reasoning": "blue ink" "cause_of_error": "%s"}' % CAUSE,
    "inner_quotes": '{"cause_of_error": "The "blue" ink resembles the eights in the training set."}',
    "unquoted_value": '{"cause_of_error": The blue ink resembles the eights in the training set.}',
    # A whole object, then a second one cut short: the whole one was closed by the model, so it stands.
    "whole_then_cut": '{"cause_of_error": "%s"}\n{"note": "and also the' % CAUSE,
}

# Replies cut short (issue 27 §3): json-repair would close them and return the fragment as the answer.
CUT_SHORT = {
    "at_token_limit": '{"cause_of_error": "The model',
    "mid_sentence": '{"cause_of_error": "%s' % CAUSE[:-12],
    "nested": '{"answer": {"cause_of_error": "%s", "conf' % CAUSE,
    "after_prose": 'My answer:\n{"reasoning": "ink", "cause_of_error": "%s' % CAUSE,
    "before_the_field": '{"reasoning": "The blue ink is',
    "fenced": '```json\n{"cause_of_error": "The blue ink',
    "after_a_closed_prose_brace": 'I weighed {colour, shape}. {"cause_of_error": "The model',
    "single_quoted": "{'cause_of_error': 'The model",
    "list": '[{"cause_of_error": "The model',
}


@pytest.mark.parametrize("name", sorted(READABLE))
def test_messy_reply_yields_the_field(name):
    value = extract_field(READABLE[name], "cause_of_error")
    assert "blue" in value and "eights" in value


def test_values_are_exact_for_clean_cases():
    for name in ("plain", "fenced", "single_quotes", "trailing_comma", "list_of_objects", "smart_quotes",
                 "hash_comment", "unquoted_keys", "missing_comma", "unquoted_value", "whole_then_cut"):
        assert extract_field(READABLE[name], "cause_of_error") == CAUSE, name
    assert extract_field(READABLE["single_quotes_apostrophe"], "cause_of_error").startswith("The model's")
    assert extract_field(READABLE["escaped_quote"], "cause_of_error").startswith('The "blue" ink')
    assert extract_field(READABLE["inner_quotes"], "cause_of_error").startswith('The "blue" ink')
    assert extract_json(READABLE["missing_comma"], ("reasoning", "cause_of_error"))["reasoning"] == "blue ink"


def test_paper_style_edit_reply_with_comment():
    reply = ('```json\n{\n "reasoning": "Blue ink is the spurious cue.",\n'
             ' "solution": "Recolour the digit red" # 1 sentence and lower than 10 words\n}\n```')
    obj = extract_json(reply, ("reasoning", "solution"))
    assert obj["solution"] == "Recolour the digit red"


def test_first_object_with_required_keys_wins():
    reply = '{"reasoning": "x"} then {"reasoning": "y", "solution": "make it red"}'
    assert extract_json(reply, ("solution",))["solution"] == "make it red"
    assert extract_json(reply)["reasoning"] == "x"


GARBAGE = ["", "   ", None, "the the the of of of", "<|im_end|>", "{unbalanced", "cause_of_error: blue ink",
           '{"something_else": "blue ink"}', "[1, 2, 3]", "{'a': }"]


@pytest.mark.parametrize("reply", GARBAGE)
def test_garbage_raises_malformed_output(reply):
    with pytest.raises(MalformedOutputError) as err:
        extract_field(reply, "cause_of_error")
    assert err.value.message


def test_error_says_which_field_is_missing():
    with pytest.raises(MalformedOutputError, match='"cause_of_error"'):
        extract_field('{"something_else": 1}', "cause_of_error")


def test_empty_value_is_malformed():
    with pytest.raises(MalformedOutputError, match="empty"):
        extract_field('{"cause_of_error": "  "}', "cause_of_error")


@pytest.mark.parametrize("name", sorted(CUT_SHORT))
def test_a_reply_cut_short_is_not_read_as_an_answer(name):
    with pytest.raises(CutOffOutputError, match="unterminated JSON object"):
        extract_field(CUT_SHORT[name], "cause_of_error")
    assert runs_off_end(CUT_SHORT[name])


def test_malformed_but_closed_is_not_cut_short():
    """A closer that does not match is malformed, not cut short: json-repair's reading of it stands as before."""
    assert not runs_off_end('{"cause_of_error": [1, 2}')
    assert extract_field('{"cause_of_error": [1, 2}', "cause_of_error") == "1 2"
    for reply in ('{"something_else": "x"}', "no JSON at all"):
        with pytest.raises(MalformedOutputError) as err:
            extract_field(reply, "cause_of_error")
        assert not isinstance(err.value, CutOffOutputError) and not runs_off_end(reply)
    assert not runs_off_end(READABLE["single_quotes_apostrophe"]) and not runs_off_end(READABLE["inner_quotes"])
    # Open brackets with no key in them are garbage, not an answer cut short.
    for reply in ("{unbalanced", "lorem ipsum {{{ the the"):
        with pytest.raises(MalformedOutputError) as err:
            extract_field(reply, "cause_of_error")
        assert not isinstance(err.value, CutOffOutputError)
