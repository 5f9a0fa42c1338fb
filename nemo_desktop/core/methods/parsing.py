"""Read the JSON object an MLLM was asked for out of whatever it actually wrote.

Models wrap the object in code fences, add text around it, use single quotes or Python literals, leave
trailing commas, copy the `# comment` of the prompt's example, use typographic quotes, answer with a list
of objects, or stop mid-object at the token limit. `extract_json` tries, in order: every fenced block, then
every balanced `{...}` / `[...]` span of the text, then a truncated object closed by hand; each snippet is
read strictly first and leniently second. The first object that has the required keys wins (searched
inside lists and nested objects too). Otherwise it raises MalformedOutputError saying what was wrong.
"""
from __future__ import annotations

import ast
import json
import re
from typing import Any, Iterable, Iterator, Sequence

from ..errors import MalformedOutputError

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
    seen_object = False
    for snippet in _snippets(text):
        obj = loads_lenient(snippet)
        if obj is None:
            continue
        seen_object = seen_object or isinstance(obj, (dict, list))
        found = _find_dict(obj, required_keys)
        if found is not None:
            return found
    keys = ", ".join(f'"{k}"' for k in required_keys)
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
    """json.loads, then the same after common repairs, then Python-literal syntax; None if all fail."""
    for attempt in (snippet, _repair(snippet)):
        try:
            return json.loads(attempt, strict=False)
        except ValueError:
            pass
    try:
        return ast.literal_eval(_pythonize(_repair(snippet, keep_single_quotes=True)))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


# -- candidate snippets -------------------------------------------------------------------------------------
def _snippets(text: str) -> Iterator[str]:
    text = text.translate(_SMART)
    for m in _FENCE.finditer(text):
        body = m.group(2).strip()
        if body:
            yield body
            yield from _balanced_spans(body)
    yield text.strip()
    yield from _balanced_spans(text)
    truncated = _close_truncated(text)
    if truncated is not None:
        yield truncated


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
                return None
            stack.pop()
            if not stack:
                return i
        i += 1
    return None


def _close_truncated(text: str) -> str | None:
    """A reply cut off by the token limit: close the open string and brackets of the first object."""
    start = text.find("{")
    if start < 0 or _match_end(text, start) is not None:
        return None
    stack: list[str] = []
    quote: str | None = None
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c == '"':
            quote = c
        elif c in _CLOSERS:
            stack.append(_CLOSERS[c])
        elif c in "}]" and stack:
            stack.pop()
        i += 1
    body = text[start:].rstrip()
    if quote:
        body += quote
    body = re.sub(r",\s*$", "", body)
    return body + "".join(reversed(stack))


# -- repairs ------------------------------------------------------------------------------------------------
def _closes_single(text: str, i: int) -> bool:
    """Inside a single-quoted string, a quote closes it only if what follows can follow a value."""
    rest = text[i + 1:].lstrip()
    return not rest or rest[0] in ",:}]\n"


def _repair(s: str, keep_single_quotes: bool = False) -> str:
    """Drop comments and trailing commas, convert single-quoted strings (outside double-quoted ones)."""
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == '"':
            j = i + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            out.append(s[i:j + 1])
            i = j + 1
            continue
        if c == "'" and not (i > 0 and s[i - 1].isalnum()):
            j = i + 1
            while j < n and not (s[j] == "'" and _closes_single(s, j)):
                j += 2 if s[j] == "\\" else 1
            inner = s[i + 1:j]
            if keep_single_quotes:
                out.append(repr(inner.replace("\\'", "'")))
            else:
                out.append(json.dumps(inner.replace("\\'", "'")))
            i = j + 1
            continue
        if c == "#" or (c == "/" and s[i:i + 2] == "//"):
            while i < n and s[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _pythonize(s: str) -> str:
    """JSON literals to Python ones, outside strings, for ast.literal_eval."""
    parts = re.split(r"(\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*')", s)
    for k in range(0, len(parts), 2):
        parts[k] = re.sub(r"\btrue\b", "True", parts[k])
        parts[k] = re.sub(r"\bfalse\b", "False", parts[k])
        parts[k] = re.sub(r"\bnull\b", "None", parts[k])
    return "".join(parts)


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
