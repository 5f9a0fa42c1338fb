"""Turn a user's label (a class name or an index) into a class index, with close matches on a typo."""
from __future__ import annotations

import difflib
from typing import Sequence

from ..base.errors import ConfigError


def _norm(s: str) -> str:
    return " ".join(s.replace("_", " ").replace("-", " ").lower().split())


def resolve_label(label: int | str, class_names: Sequence[str]) -> int:
    """Exact name, then case/underscore-insensitive name (or one of its comma-separated synonyms), then an
    integer index. An unknown label raises ConfigError listing the closest class names."""
    n = len(class_names)
    if isinstance(label, int) and not isinstance(label, bool):
        if 0 <= label < n:
            return label
        raise ConfigError(f"Class index {label} is out of range: the classifier has {n} classes (0..{n - 1}).")
    text = str(label).strip()
    # ImageNet-1k names two classes "crane" (the bird and the machine): an exact duplicate is ambiguous too.
    matches = [i for i, name in enumerate(class_names) if name == text]
    if not matches:
        want = _norm(text)
        matches = [i for i, name in enumerate(class_names)
                   if _norm(name) == want or want in (_norm(s) for s in name.split(","))]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        listed = ", ".join(f"{i} ({class_names[i]})" for i in matches[:10])
        raise ConfigError(f"The label '{text}' matches several classes: {listed}.",
                          hint="Give the class index instead.")
    if text.lstrip("-").isdigit():
        return resolve_label(int(text), class_names)
    want = _norm(text)
    close = difflib.get_close_matches(want, [_norm(c) for c in class_names], n=5, cutoff=0.6)
    by_norm = {_norm(c): c for c in class_names}
    hint = (f"Did you mean: {', '.join(repr(by_norm[c]) for c in close)}?" if close
            else "Give a class name exactly as the classifier names it, or a class index.")
    raise ConfigError(f"Unknown label '{text}': the classifier has no class of that name.", hint=hint)
