"""Read the JSON object an MLLM was asked for out of whatever it actually wrote.

Models wrap the object in code fences, add text around it, use single quotes or Python literals, leave
trailing commas or out commas, leave keys unquoted, put unescaped quotes inside strings, copy the `# comment`
of the prompt's example, use typographic quotes, or answer with a list of objects. `extract_json` tries, in
order: every fenced block, then the whole text, then every balanced `{...}` / `[...]` span of it; each
snippet is read strictly first and then with the maintained `json-repair` package (which fixes the above).
The first object that has the required keys wins (keys matched loosely, searched inside lists and nested
objects too). Otherwise it raises MalformedOutputError saying what was wrong.

A reply that stops inside an object it opened (`{"cause_of_error": "The model`, cut at the token limit) is
NOT read: json-repair would close it and hand back "The model" as if it were the answer (issue 27 §3). Such a
snippet is skipped, and when nothing whole is left the error is CutOffOutputError, so that callers can ask
again with a larger budget instead of repairing a fragment.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator, Sequence

from ..base.errors import CutOffOutputError, MalformedOutputError

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_SMART = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"',
                        "\u2018": "'", "\u2019": "'", "\u201a": "'"})
_CLOSERS = {"{": "}", "[": "]"}


def extract_json(text: str | None, required_keys: Sequence[str] = ()) -> dict[str, Any]:
    """The first JSON object in `text` that has every key in `required_keys` (keys matched loosely:
    case, spaces, hyphens and underscores are ignored, and the result uses the required spelling)."""
    if text is None or not str(text).strip():
        raise MalformedOutputError("The model returned an empty reply.",
                                   hint="Try again, or use a larger or instruction-tuned model.")
    text = str(text)
    seen_object = cut_short = False
    for snippet, balanced in _snippets(text):
        obj = loads_lenient(snippet)
        if obj is None:
            continue
        if not balanced and runs_off_end(snippet):
            # Cut short if it was writing an object with a key; "{{{ the the" is garbage, not a fragment.
            cut_short = cut_short or any(d for d in _dicts(obj))
            continue
        seen_object = seen_object or isinstance(obj, (dict, list))
        found = _find_dict(obj, required_keys)
        if found is not None:
            return found
    keys = ", ".join(f'"{k}"' for k in required_keys)
    if cut_short:
        raise CutOffOutputError("The model's reply stops inside an unterminated JSON object (cut short, "
                                "most likely at the token limit).",
                                hint="Ask again with a larger token budget.", detail=_clip(text))
    if seen_object and required_keys:
        msg = f"The model's reply is JSON but has no {keys} field."
    else:
        msg = "The model's reply contains no readable JSON object."
    raise MalformedOutputError(msg, hint="The raw reply is kept with the result for inspection.",
                               detail=_clip(text))


def extract_field(text: str | None, key: str) -> str:
    """The non-empty string value of `key` in the reply's JSON object."""
    obj = extract_json(text, (key,))
    value = obj[key]
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    value = "" if value is None else str(value).strip()
    if not value:
        raise MalformedOutputError(f'The model left the "{key}" field empty.', detail=_clip(str(text)))
    return value


def loads_lenient(snippet: str) -> Any:
    """json.loads, else json-repair's reading of the snippet; None when neither finds a JSON value."""
    try:
        return json.loads(snippet, strict=False)
    except ValueError:
        pass
    import json_repair

    try:
        obj = json_repair.loads(snippet, skip_json_loads=True)
    except (ValueError, RecursionError):
        return None
    return None if obj == "" else obj  # "" is json-repair's "nothing found"


def runs_off_end(text: str) -> bool:
    """Whether a `{` or `[` opened in `text` (or a string inside it) is still open where the text ends."""
    text = str(text).translate(_SMART)
    i, n = 0, len(text)
    while i < n:
        if text[i] in _CLOSERS:
            end, still_open = _scan(text, i)
            if still_open:
                return True
            i = end + 1 if end is not None else i + 1
            continue
        i += 1
    return False


# -- candidate snippets -------------------------------------------------------------------------------------
def _snippets(text: str) -> Iterator[tuple[str, bool]]:
    """(snippet, whether it is a balanced span, i.e. closed by construction)."""
    text = text.translate(_SMART)
    for m in _FENCE.finditer(text):
        body = m.group(2).strip()
        if body:
            yield body, False
            yield from ((span, True) for span in _balanced_spans(body))
    yield text.strip(), False
    yield from ((span, True) for span in _balanced_spans(text))


def _balanced_spans(text: str) -> Iterator[str]:
    """Every outermost balanced {...} or [...] span, honouring quoted strings (both quote kinds)."""
    i, n = 0, len(text)
    while i < n:
        if text[i] in _CLOSERS:
            end = _match_end(text, i)
            if end is not None:
                yield text[i:end + 1]
                i = end + 1
                continue
        i += 1


def _match_end(text: str, start: int) -> int | None:
    return _scan(text, start)[0]


def _scan(text: str, start: int) -> tuple[int | None, bool]:
    """(index of the bracket that closes the one at `start`, or None; True when the text ended first, as
    opposed to a mismatched closer, which is malformed rather than cut short)."""
    stack: list[str] = []
    quote: str | None = None
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote and (quote == '"' or _closes_single(text, i)):
                quote = None
        elif c in "\"'":
            # An apostrophe inside a word ("model's") does not open a string.
            if c == '"' or not (i > 0 and text[i - 1].isalnum()):
                quote = c
        elif c in _CLOSERS:
            stack.append(_CLOSERS[c])
        elif c in "}]":
            if not stack or c != stack[-1]:
                return None, False
            stack.pop()
            if not stack:
                return i, False
        i += 1
    return None, True


# -- quotes -------------------------------------------------------------------------------------------------
def _closes_single(text: str, i: int) -> bool:
    """Inside a single-quoted string, a quote closes it only if what follows can follow a value."""
    rest = text[i + 1:].lstrip()
    return not rest or rest[0] in ",:}]\n"


# -- finding the object -------------------------------------------------------------------------------------
def _norm_key(k: object) -> str:
    return re.sub(r"[\s_\-]+", "", str(k)).lower()


def _find_dict(obj: Any, required: Sequence[str]) -> dict[str, Any] | None:
    for d in _dicts(obj):
        if not required:
            return d
        by_norm = {_norm_key(k): k for k in d}
        if all(_norm_key(r) in by_norm for r in required):
            out = dict(d)
            for r in required:
                out[r] = d[by_norm[_norm_key(r)]]
            return out
    return None


def _dicts(obj: Any) -> Iterable[dict]:
    """Dicts in breadth-first order: the object itself, then list items and nested values."""
    queue = [obj]
    while queue:
        x = queue.pop(0)
        if isinstance(x, dict):
            yield x
            queue.extend(v for v in x.values() if isinstance(v, (dict, list)))
        elif isinstance(x, list):
            queue.extend(v for v in x if isinstance(v, (dict, list)))


def _clip(text: str, n: int = 2000) -> str:
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more characters]"
