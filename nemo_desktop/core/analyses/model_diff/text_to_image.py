"""Open conditions through a text-to-image model (seed 002 §5.3): G(c) = m images of the condition's text,
labelled with the condition's class.

The condition space is the shipped gender captions (50 templates x {man, woman}, A.3) unless a conditions
file is given: JSON {"name", "task_description", "labels": [...], "conditions": [{"text", "label"}, ...]}, the
shipped file's format. Images are seeded per (run seed, condition), so a condition's images are the same in
every run with that seed and can be regenerated for the report's evidence.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...base.errors import ConfigError
from .conditions import Condition, ConditionSpace, load_open_conditions
from .llm_calls import derive_seed


def load_condition_file(path: Path) -> ConditionSpace:
    path = Path(path).expanduser()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        labels = tuple(str(x) for x in data["labels"])
        conds = tuple(Condition.open(str(c["text"]), str(c["label"])) for c in data["conditions"])
        space = ConditionSpace(name=f"file:{path.name}", task_description=str(data["task_description"]),
                               open_conditions=conds, labels=labels)
    except FileNotFoundError:
        raise ConfigError(f"The conditions file {path} does not exist.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"Cannot read the conditions file {path}.",
                          hint='Write {"task_description": ..., "labels": [...], "conditions": '
                               '[{"text": ..., "label": ...}, ...]}.', detail=repr(exc)) from exc
    unknown = sorted({c.label for c in conds} - set(labels))
    if not conds or unknown:
        raise ConfigError(f"The conditions file {path} has no conditions, or labels not in 'labels': "
                          f"{', '.join(unknown)}.")
    return space


class TextToImageConditions:
    """ConditionGenerator over a text-to-image model (`generate(prompt, n=, seed=, on_step=)`)."""

    def __init__(self, model: Any, space: ConditionSpace | None = None) -> None:
        self.model = model
        self.space = space or load_open_conditions("gender")
        self._conditions_sha = hashlib.sha256("\n".join(f"{c.text}\t{c.label}" for c in
                                                        self.space.all_conditions()).encode()).hexdigest()[:16]

    @property
    def info(self) -> Mapping[str, Any]:
        m = self.model.info
        return {"source": "text-to-image", "version": 1, "model": m.model_id, "revision": m.revision,
                "settings": dict((m.extra or {}).get("settings", {})), "pipeline": (m.extra or {}).get("pipeline"),
                "conditions": self.space.name, "conditions_sha256": self._conditions_sha}

    def sample(self, condition: Condition, m: int, seed: int, *, ctx: Any = None) -> list:
        on_step = None
        if ctx is not None:
            on_step = ctx.step_callback("Generating images")
        images = self.model.generate(condition.text, n=int(m), seed=derive_seed(seed, "t2i", condition.id),
                                     on_step=on_step)
        return [(im, condition.label) for im in images[:m]]
