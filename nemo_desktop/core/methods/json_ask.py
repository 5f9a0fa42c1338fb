"""Asking the MLLM for one JSON field, one request or a stage's requests at once (models/requests.py).

A reply cut short at the token limit is asked again once with a larger budget (cut_off.py); one otherwise
unreadable gets one repair turn; the outcome records every raw reply. Shared by SciTX's hypothesis draws and
interventions, the baselines' draws and the global explanation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..base.errors import MalformedOutputError
from ..models.protocols import ChatMessage, ChatRequest
from ..models.requests import send_requests
from .cut_off import RETRY_FACTOR, cut_off_error, finish_record, is_cut_off
from .parsing import extract_field, extract_json
from .prompts import PromptTemplate


def _jsonable(x: Any) -> Any:
    import json

    return json.loads(json.dumps(x, sort_keys=True, default=str))


def safe_json(raw: str, field_name: str) -> dict | None:
    try:
        return _jsonable(extract_json(raw, (field_name,)))
    except MalformedOutputError:
        return None


@dataclass
class JsonAsk:
    """One request of `ask_json_batch`: a conversation, greedy (`sampling` None) or one seeded draw."""

    messages: list[ChatMessage]
    seed: int | None = None
    sampling: Any = None  # models.sampling.Sampling, or None for greedy
    temperature: float = 0.0  # used when `sampling` is None (0 = greedy)

    def request(self, max_new_tokens: int) -> ChatRequest:
        ask = self.sampling.chat_kwargs() if self.sampling is not None else {"temperature": self.temperature}
        return ChatRequest(self.messages, max_new_tokens=max_new_tokens, seed=self.seed, **ask)


def ask_json(mllm: Any, repair: PromptTemplate, messages: list[ChatMessage], field_name: str, max_new_tokens: int,
             temperature: float, seed: int | None, sampling: Any = None) -> dict[str, Any]:
    """Ask, parse `field_name`; a reply cut short is asked again once with a larger budget and, if cut again,
    is an outcome of its own (cut_off.py); one repair turn (greedy) if otherwise unreadable. Returns
    value/error/raw replies/parsed and how the reply ended. `sampling` (models.sampling.Sampling) makes the
    first call a sampled draw with every field explicit. Raises what the MLLM raises."""
    outcome = ask_json_batch(mllm, repair, [JsonAsk(messages, seed, sampling, temperature)], field_name,
                             max_new_tokens)[0]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def ask_json_batch(mllm: Any, repair: PromptTemplate, asks: Sequence[JsonAsk], field_name: str,
                   max_new_tokens: int) -> list[dict[str, Any] | Exception]:
    """`ask_json` for several requests, each round sent at once (models/requests.py): the first replies, then
    the cut ones asked again, then the repair turns. A request whose call raised gets that exception as its
    outcome (JobCancelled is raised). One request alone makes the same calls as before."""
    n = len(asks)
    outcomes: list[Any] = [None] * n
    records: list[dict[str, Any]] = [{} for _ in range(n)]
    budgets = [max_new_tokens] * n
    raws = _send_round(mllm, [a.request(max_new_tokens) for a in asks], list(range(n)), outcomes)
    cut = [i for i in range(n) if outcomes[i] is None and is_cut_off(raws[i], field_name, max_new_tokens)]
    for i in cut:
        budgets[i] = max_new_tokens * RETRY_FACTOR
        records[i] = {"cut_off_reply": raws[i], "retry_max_new_tokens": budgets[i]}
    again = _send_round(mllm, [asks[i].request(budgets[i]) for i in cut], cut, outcomes)  # the same draw, more room
    for i in cut:
        if outcomes[i] is not None:
            continue
        raws[i] = again[i]
        if is_cut_off(raws[i], field_name, budgets[i]):  # no repair turn: it would only finish the fragment
            outcomes[i] = {"value": None, "raw_reply": raws[i], "repair_reply": None, "parsed": None,
                           "error": cut_off_error(raws[i], max_new_tokens, budgets[i]), **records[i],
                           **finish_record(raws[i])}
    unreadable: dict[int, MalformedOutputError] = {}
    for i in range(n):
        if outcomes[i] is not None:
            continue
        records[i].update(finish_record(raws[i]))
        try:
            outcomes[i] = {"value": extract_field(raws[i], field_name), "error": None, "raw_reply": raws[i],
                           "repair_reply": None, "parsed": safe_json(raws[i], field_name), **records[i]}
        except MalformedOutputError as first:
            unreadable[i] = first
    todo = list(unreadable)
    follow_ups = []
    for i in todo:
        text = repair.render(error=unreadable[i].message.rstrip("."), keys=f'"{field_name}"')
        follow = [*asks[i].messages, ChatMessage("assistant", [raws[i] or ""]), ChatMessage.user(text)]
        follow_ups.append(ChatRequest(follow, max_new_tokens=budgets[i], temperature=0.0, seed=asks[i].seed))
    repaired = _send_round(mllm, follow_ups, todo, outcomes)
    for i in todo:
        if outcomes[i] is not None:
            continue
        raw2 = repaired[i]
        try:
            outcomes[i] = {"value": extract_field(raw2, field_name), "error": None, "raw_reply": raws[i],
                           "repair_reply": raw2, "parsed": safe_json(raw2, field_name), **records[i]}
        except MalformedOutputError as second:
            outcomes[i] = {"value": None, "raw_reply": raws[i], "repair_reply": raw2, "parsed": None,
                           "error": f"Unreadable reply, also after one repair request: {second.message}",
                           **records[i]}
    return outcomes


def _send_round(mllm: Any, requests: list[ChatRequest], indices: list[int], outcomes: list[Any]) -> dict[int, Any]:
    """Send one round; the replies by request index. A request's exception is stored as its outcome."""
    replies: dict[int, Any] = {}
    for i, reply in zip(indices, send_requests(mllm, requests)):
        if isinstance(reply, BaseException):
            outcomes[i] = reply
        else:
            replies[i] = reply
    return replies
