"""Raw Differences (Alg. 1), Summarization (Alg. 2) and the reply parsing of Optimization's two prompts.

Replies are read leniently (methods.parsing): P2 asks for {"explanation": ...}; P4 for
`"feedback": ..., "explanation": ...` without braces (so the reply is also tried wrapped in braces); P5 for
`[{strategy: ..., {condition: ...}}, ...]`, which is not JSON (items are read one balanced {...} at a time).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from ...base.errors import ConfigError, MalformedOutputError
from ...methods.parsing import extract_json, loads_lenient
from .conditions import Condition, ConditionSpace
from .differences import ConditionMeasurement


def raw_differences(measurements: Sequence[ConditionMeasurement]) -> str:
    """Alg. 1's explanation: one result line per condition."""
    return "\n".join(m.line() for m in measurements)


def parse_explanation(reply: str) -> str:
    """The `explanation` field of a P2 reply."""
    return _fields(reply, ("explanation",))["explanation"]


def parse_update(reply: str) -> tuple[str, str | None]:
    """(explanation, feedback) of a P4 reply."""
    obj = _fields(reply, ("explanation",))
    feedback = obj.get("feedback")
    return obj["explanation"], None if feedback is None else str(feedback)


def _fields(reply: str, keys: Sequence[str]) -> dict[str, Any]:
    try:
        obj = extract_json(reply, keys)
    except MalformedOutputError:
        wrapped = loads_lenient("{" + str(reply or "").strip().strip(",") + "}")
        if not isinstance(wrapped, dict) or any(k not in wrapped for k in keys):
            raise
        obj = wrapped
    value = obj[keys[0]]
    if not isinstance(value, str) or not value.strip():
        raise MalformedOutputError(f'The model left the "{keys[0]}" field empty.')
    return {**obj, keys[0]: " ".join(value.split())}


_ITEM = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")


def parse_proposals(reply: str) -> list[dict[str, Any]]:
    """The items of a P5 reply: dicts with an optional 'strategy' and the condition's keys."""
    text = str(reply or "")
    whole = loads_lenient(text.strip())
    if isinstance(whole, list) and all(isinstance(x, dict) for x in whole):
        return whole
    items = []
    for m in _ITEM.finditer(text):
        obj = loads_lenient(m.group(0))
        if obj is None:
            obj = loads_lenient(_quote_bare(m.group(0)))
        if isinstance(obj, dict):
            items.append(obj)
    if not items:
        raise MalformedOutputError("The exploration reply lists no readable conditions.",
                                   detail=text[:2000])
    return items


def _quote_bare(s: str) -> str:
    """`{strategy: exploration, digit: 3}` -> JSON with quoted keys and values."""
    s = re.sub(r"([{,]\s*)([A-Za-z_][\w ]*?)\s*:", r'\1"\2":', s)
    return re.sub(r':\s*([A-Za-z][\w -]*?)\s*([,}])', r': "\1"\2', s)


def proposals_to_conditions(items: Sequence[dict[str, Any]], space: ConditionSpace, seen: set[str], k: int) \
        -> list[tuple[Condition | None, str | None, str | None, Any]]:
    """(condition or None, strategy, reason dropped, proposal) for each proposed item, at most k valid."""
    out = []
    valid = 0
    for item in items:
        strategy = item.get("strategy")
        strategy = None if strategy is None else str(strategy).strip().lower()
        body = {k2: v for k2, v in item.items() if str(k2).lower() != "strategy"}
        try:
            cond = space.parse_proposal(body)
        except ConfigError as exc:
            out.append((None, strategy, f"invalid: {exc.message}", item))
            continue
        if cond.id in seen:
            out.append((cond, strategy, "repeated", item))
            continue
        if valid >= k:
            out.append((cond, strategy, f"beyond the {k} requested", item))
            continue
        seen.add(cond.id)
        valid += 1
        out.append((cond, strategy, None, item))
    return out
