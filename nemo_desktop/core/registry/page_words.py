"""An error written for the command line, said in the words of the app's page that ran the analysis: each
`--flag` of the analysis' settings becomes the label its form shows ("--data augment" -> “Targeted data”: augment),
each component's flag the name of its picker ("--generator" -> “Condition source”). Derived from the registry entry
(its config's field labels, the roles' labels), so every analysis' page speaks its own words with nothing written
per analysis."""
from __future__ import annotations

import re
from typing import Any

from .params import config_params
from .spec import ROLE_LABELS, ROLES

_FLAG = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?:(\s+)([\w.-]+))?")


def page_labels(spec: Any) -> dict[str, tuple[str, tuple[str, ...]]]:
    """flag name ('affected-classes') -> (the label the page shows, the setting's choices)."""
    out = {role.replace("_", "-"): (ROLE_LABELS.get(role, role), ()) for role in ROLES}
    for param in config_params(spec.config) if spec.config is not None else []:
        out[param.name.replace("_", "-")] = (param.label, tuple(param.choices or ()))
    return out


def in_page_words(text: str | None, spec: Any) -> str | None:
    """`text` with the analysis' command-line flags named as its page names them; other text is left alone."""
    if not text or "--" not in text:
        return text
    labels = page_labels(spec)
    for name, (label, _choices) in labels.items():  # "Seed (--seed) must be ...": the label once
        text = text.replace(f"{label} (--{name})", f"“{label}”")

    def say(m: re.Match) -> str:
        name, space, word = m.group(1), m.group(2), m.group(3)
        if name not in labels:
            return m.group(0)
        label, choices = labels[name]
        if word is not None and word in choices:  # "--data augment": the value chosen in that field
            return f"“{label}”: {word}"
        return f"“{label}”" + (f"{space}{word}" if word is not None else "")

    return _FLAG.sub(say, text)
