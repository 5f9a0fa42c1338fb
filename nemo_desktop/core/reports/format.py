"""How numbers, names, dates and payload fields are written in reports."""
from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import PurePath
from typing import Any

from .document import DASH


def fmt_prob(p: float | None) -> str:
    return DASH if p is None or not math.isfinite(p) else f"{100 * p:.1f} %"


def fmt_cei(c: float | None) -> str:
    return DASH if c is None or not math.isfinite(c) else f"{c:+.2f} pp"


def fmt_num(x: float | None, digits: int = 3) -> str:
    return DASH if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _label(name: str, index: int | None) -> str:
    return f"{name} (class {index})" if index is not None else name


def clip(s: str | None, n: int = 80) -> str:
    """Titles, captions and index cells show at most n characters; the full text is in the body."""
    s = s or ""
    return s if len(s) <= n else s[:n - 1] + "\u2026"


def _short(s: str | None, n: int = 12) -> str:
    return (s or "")[:n]


def _display_name(path: str | None) -> str:
    return PurePath(path).name if path else DASH


def _now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def _date(ts: float | None) -> str:
    if ts is None:
        return DASH
    return _dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested manifest -> ("models.mllm.revision", "abc") rows, in insertion order."""
    if isinstance(value, dict):
        if not value:
            return [(prefix, "{}")] if prefix else []
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return [(prefix, ", ".join(str(v) for v in value))]
        out = []
        for i, v in enumerate(value):
            out += _flatten(v, f"{prefix}[{i}]")
        return out
    if isinstance(value, (int, float)) and not isinstance(value, bool) and _is_timestamp(prefix, value):
        return [(prefix, _date(value))]  # "created_at": a date, not 1.79588e+09
    if isinstance(value, float):
        return [(prefix, f"{value:g}")]
    return [(prefix, DASH if value is None else str(value))]


def _is_timestamp(key: str, value: float) -> bool:
    """A manifest's time stamp ("created_at", "started_at", …): seconds since 1970, after 2001."""
    return key.rsplit(".", 1)[-1].endswith("_at") and 1e9 <= value < 1e11


def _name_of(v: Any) -> str | None:
    """A dataset/classifier given as text, a dict with an id/name, or a list of either."""
    if v is None or v == "":
        return None
    if isinstance(v, dict):
        for k in ("id", "name", "model_id", "repo_id"):
            if v.get(k):
                return str(v[k])
        return json.dumps(v, sort_keys=True, default=str)
    if isinstance(v, (list, tuple)):
        names = [n for n in (_name_of(x) for x in v) if n]
        return ", ".join(names) or None
    return str(v)


def llm_match_of(payload: dict) -> float | None:
    """LLM Match of one stored result (see the module docstring), or None when not judged."""
    v = payload.get("llm_match")
    if isinstance(v, dict):
        v = v.get("score", v.get("mean"))
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)
