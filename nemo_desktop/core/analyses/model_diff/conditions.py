"""Conditions c of the seed's generator G: C -> X x Y, and the spaces they come from.

A condition is either an attribute assignment from a grid (CMNIST: digit / colour / angle) or an open text
with its label (a text-to-image caption). Either way it has a stable id (used in cache keys and for
Density's per-condition word drops), the class name its images carry, and one line of text that the prompts
show (`digit=3, color=green, angle=-30`).
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ...base.errors import ConfigError
from ...base.resources import resource_path


@dataclass(frozen=True)
class Condition:
    """One condition: ordered attributes (name, value) and the class label of its images."""

    attributes: tuple[tuple[str, str], ...]
    label: str

    @property
    def id(self) -> str:
        return hashlib.sha256(json.dumps([list(self.attributes), self.label]).encode()).hexdigest()[:16]

    @property
    def text(self) -> str:
        """How the prompts name the condition."""
        return ", ".join(f"{k}={v}" if k != "text" else v for k, v in self.attributes)

    def get(self, name: str, default: str | None = None) -> str | None:
        return dict(self.attributes).get(name, default)

    def to_dict(self) -> dict[str, Any]:
        return {"attributes": [list(a) for a in self.attributes], "label": self.label}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Condition":
        return cls(tuple((str(k), str(v)) for k, v in d["attributes"]), str(d["label"]))

    @classmethod
    def open(cls, text: str, label: str) -> "Condition":
        return cls((("text", text.strip()),), label)


@dataclass(frozen=True)
class Attribute:
    name: str
    values: tuple[str, ...]
    describe: str = ""


@dataclass(frozen=True)
class ConditionSpace:
    """Where conditions come from: an attribute grid (`attributes` non-empty) or a list of open conditions.

    `label_attribute` names the grid attribute that is the class (CMNIST: `digit`); `label_names` maps its
    values to the classifiers' class names when they differ (digit "3" -> class "3" by default).
    `label_aliases` declares, per class label, the other names a classifier may give that class (the shipped
    CMNIST grid: "3" is also "three", as the demo classifier names it); see labels.match_labels."""

    name: str
    task_description: str
    attributes: tuple[Attribute, ...] = ()
    label_attribute: str | None = None
    label_names: Mapping[str, str] = field(default_factory=dict)
    label_aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    open_conditions: tuple[Condition, ...] = ()
    labels: tuple[str, ...] = ()  # class names of an open space (the grid's come from its label attribute)
    extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. the grid's colour RGB values

    @property
    def is_grid(self) -> bool:
        return bool(self.attributes)

    def class_labels(self) -> tuple[str, ...]:
        if self.is_grid:
            attr = self.attribute(self.label_attribute or "")
            return tuple(self.label_names.get(v, v) for v in attr.values)
        return self.labels or tuple(dict.fromkeys(c.label for c in self.open_conditions))

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise ConfigError(f"The condition space '{self.name}' has no attribute '{name}'.",
                          hint=f"Its attributes: {', '.join(a.name for a in self.attributes) or 'none'}.")

    def make(self, values: Mapping[str, Any]) -> Condition:
        """A grid condition from attribute values (every attribute once; values must be in the grid)."""
        attrs = []
        for a in self.attributes:
            if a.name not in values:
                raise ConfigError(f"The condition {dict(values)} has no value for '{a.name}'.")
            v = _canonical_value(values[a.name])
            if v not in a.values:
                raise ConfigError(f"'{values[a.name]}' is not an allowed value of '{a.name}'.",
                                  hint=f"Allowed: {', '.join(a.values)}.")
            attrs.append((a.name, v))
        label = dict(attrs)[self.label_attribute] if self.label_attribute else ""
        return Condition(tuple(attrs), self.label_names.get(label, label))

    def all_conditions(self) -> list[Condition]:
        if not self.is_grid:
            return list(self.open_conditions)
        combos: list[dict[str, str]] = [{}]
        for a in self.attributes:
            combos = [{**c, a.name: v} for c in combos for v in a.values]
        return [self.make(c) for c in combos]

    def size(self) -> int:
        if not self.is_grid:
            return len(self.open_conditions)
        n = 1
        for a in self.attributes:
            n *= len(a.values)
        return n

    def sample(self, k: int, seed: int, exclude: Iterable[str] = ()) -> list[Condition]:
        """k distinct conditions uniformly at random (fewer when the space is smaller), seeded."""
        skip = set(exclude)
        pool = [c for c in self.all_conditions() if c.id not in skip]
        rng = random.Random(f"{self.name}:{seed}")
        return rng.sample(pool, min(k, len(pool)))

    def description(self) -> str:
        """The `{condition_description}` of the exploration prompt: attributes and their allowed values."""
        if not self.is_grid:
            labels = ", ".join(self.class_labels())
            return (f"Each condition is a short caption describing the content of an image, with a label that is "
                    f"one of: {labels}. Write each condition as {{\"text\": caption, \"label\": label}}.")
        lines = []
        for a in self.attributes:
            what = f" ({a.describe})" if a.describe else ""
            lines.append(f"- {a.name}{what}: one of {', '.join(a.values)}")
        keys = ", ".join(f'"{a.name}": value' for a in self.attributes)
        lines.append(f"Write each condition as {{{keys}}}.")
        return "\n".join(lines)

    def parse_proposal(self, item: Mapping[str, Any]) -> Condition:
        """A condition proposed by the exploration LLM (keys matched loosely); ConfigError when invalid."""
        flat: dict[str, Any] = {}
        for k, v in item.items():
            if isinstance(v, Mapping):
                flat.update({_norm(kk): vv for kk, vv in v.items()})
            else:
                flat[_norm(k)] = v
        if not self.is_grid:
            text, label = flat.get("text") or flat.get("condition"), flat.get("label")
            if not isinstance(text, str) or not text.strip():
                raise ConfigError(f"The proposed condition {dict(item)} has no text.")
            label = self.resolve_label(str(label))
            return Condition.open(text, label)
        return self.make({a.name: flat[_norm(a.name)] for a in self.attributes if _norm(a.name) in flat})

    def resolve_label(self, label: str) -> str:
        labels = self.class_labels()
        for name in labels:
            if _norm(name) == _norm(label) or any(_norm(x) == _norm(label) for x in self.label_aliases.get(name, ())):
                return name
        if label.strip().isdigit() and int(label) < len(labels) and not any(n.isdigit() for n in labels):
            return labels[int(label)]
        raise ConfigError(f"'{label}' is not a class of this condition space.", hint=f"Classes: {', '.join(labels)}.")


def _norm(s: Any) -> str:
    return "".join(ch for ch in str(s).lower() if ch.isalnum())


def _canonical_value(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v).strip()


def load_grid(name: str = "cmnist", version: int = 1) -> ConditionSpace:
    """A condition grid shipped in `resources/model_diff/` (`<name>_grid.v<version>.json`)."""
    data = json.loads(resource_path("model_diff", f"{name}_grid.v{version}.json").read_text(encoding="utf-8"))
    return grid_from_dict(data)


def grid_from_dict(data: Mapping[str, Any]) -> ConditionSpace:
    try:
        attrs = tuple(Attribute(str(a["name"]), tuple(str(v) for v in a["values"]), str(a.get("describe", "")))
                      for a in data["attributes"])
        space = ConditionSpace(name=f"{data['name']}/v{data.get('version', 1)}",
                               task_description=str(data["task_description"]), attributes=attrs,
                               label_attribute=data.get("label_attribute"),
                               label_names=dict(data.get("label_names", {})),
                               label_aliases=_aliases(data.get("label_aliases", {})),
                               extra={k: v for k, v in data.items() if k.endswith("_rgb")})
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"The condition grid is missing a field: {exc}.",
                          hint="A grid needs name, task_description, attributes [{name, values}], "
                               "label_attribute.") from exc
    if space.label_attribute:
        space.attribute(space.label_attribute)
    unknown = [k for k in space.label_aliases if k not in space.class_labels()]
    if unknown:
        raise ConfigError(f"The condition grid declares label aliases for {', '.join(map(repr, unknown))}, which "
                          "are not among its class labels.",
                          hint=f"Its class labels: {', '.join(space.class_labels())}.")
    return space


def _aliases(data: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(data, Mapping) or not all(isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)
                                                 for v in data.values()):
        raise ConfigError("The condition grid's label_aliases must map each class label to a list of names.",
                          hint='For example {"3": ["three"]}.')
    return {str(k): tuple(v) for k, v in data.items()}


def load_open_conditions(name: str = "gender", version: int = 1) -> ConditionSpace:
    """Open (caption, label) conditions shipped in `resources/model_diff/` (`<name>_captions.v<N>.json`)."""
    data = json.loads(resource_path("model_diff", f"{name}_captions.v{version}.json").read_text(encoding="utf-8"))
    conds = tuple(Condition.open(c["text"], c["label"]) for c in data["conditions"])
    return ConditionSpace(name=f"{data['name']}/v{version}", task_description=data["task_description"],
                          open_conditions=conds, labels=tuple(data["labels"]))


def conditions_text(conditions: Sequence[Condition]) -> str:
    return "\n".join(c.text for c in conditions)
