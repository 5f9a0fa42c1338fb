"""Replies cut short are not answers (issue 27 §3).

A reply cut at the token limit, `{"cause_of_error": "The model`, used to be read (json-repair closes the
object) as the hypothesis "The model", and tested. `intervention.ask_json` now asks such a reply's question ONCE
more with RETRY_FACTOR times the token budget (same conversation, seed and sampling: the same draw given more
room); a reply still cut after that is an outcome of its own, an error starting with CUT_OFF, cached like a
parse failure (it is deterministic) and never tested. The JSON-repair follow-up turn is not used on a cut
reply: it would have the model finish or shorten a fragment instead of answering.

A reply is cut when no whole JSON object with the asked field can be read from it (parsing.extract_json) and
  * it stopped at the limit (finish_reason "length"; where the finish is not known, as many completion tokens
    as the limit), or
  * it stops inside a JSON object it opened, however it ended: a plain `str` (a test double, a user's adapter)
    says nothing about the limit, and even a reply the model or a stop rule ended there ("stop") is a
    fragment that the repair turn would only close ("The model" again).
A whole object with the field is taken even from a reply that ran on to the limit: the model wrote its closing
brace, so the value is complete.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..base.errors import CutOffOutputError, MalformedOutputError
from ..models.protocols import stopped_at_limit
from .parsing import extract_field

RETRY_FACTOR = 2  # the one retry's budget, in multiples of the asked max_new_tokens
CUT_OFF = "Reply cut off"  # how a cut-off outcome's error starts (candidate_counts counts them by it)
# For manifests: what happens to a cut reply.
CUT_OFF_RECORD = {"retries": 1, "retry_budget_factor": RETRY_FACTOR}


def is_cut_off(reply: Any, field_name: str, max_new_tokens: int) -> bool:
    """Whether `reply` (a Reply or a plain str) was cut short before it gave `field_name` whole."""
    try:
        extract_field(reply, field_name)
    except CutOffOutputError:
        return True
    except MalformedOutputError:
        return stopped_at_limit(reply, max_new_tokens)
    return False


def cut_off_error(reply: Any, max_new_tokens: int, retry_budget: int) -> str:
    """The error of an outcome whose retry was cut too (it starts with CUT_OFF)."""
    if stopped_at_limit(reply, retry_budget):
        return (f"{CUT_OFF} at {retry_budget} tokens (asked with {max_new_tokens}, then once more with "
                f"{retry_budget}); not read as an answer.")
    return (f"{CUT_OFF}: it stops inside an unterminated JSON object (asked with {max_new_tokens} tokens, then "
            f"once more with {retry_budget}); not read as an answer.")


def finish_record(reply: Any) -> dict[str, Any]:
    """How a reply ended, for the unit's record (None where the adapter does not say)."""
    return {"finish_reason": getattr(reply, "finish_reason", None),
            "completion_tokens": getattr(reply, "completion_tokens", None)}


def accepted_a_cut_reply(payload: Mapping[str, Any], value_key: str, field_name: str) -> bool:
    """A unit cached before replies were checked for being cut short (it has no "finish_reason") whose value
    was read from a reply that stops inside an open object: today that value is a fragment, so the unit is
    asked again rather than reused. Newer units, and older ones read from whole objects, are reused as they are."""
    if "finish_reason" in payload or not payload.get(value_key):
        return False
    read_from = payload.get("repair_reply") if payload.get("repair_reply") is not None else payload.get("raw_reply")
    try:
        extract_field(read_from, field_name)
    except CutOffOutputError:
        return True
    except MalformedOutputError:
        return False
    return False
