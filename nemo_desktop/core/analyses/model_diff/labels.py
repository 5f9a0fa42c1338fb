"""Match the two classifiers' labels by class name, and one zero-shot model with two prompt sets.

Model differences compare two classifiers on the same classes. Their output orders may differ (a
fine-tuned head, a re-exported checkpoint), so classes are matched by name (case, spaces, '_' and '-'
ignored), or by a name the condition source declares for the class (`label_aliases`: the shipped CMNIST grid's
"3" is the demo classifier's "three"); a class one model or the condition source lacks is a ConfigError that
names it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...base.errors import ConfigError
from ...models.protocols import ModelInfo


def normalise_class_name(name: str) -> str:
    return " ".join(str(name).lower().replace("_", " ").replace("-", " ").split())


@dataclass(frozen=True)
class LabelMatch:
    """For each class of the condition source (in `labels` order), its output index in model A and B."""

    labels: tuple[str, ...]
    index_a: tuple[int, ...]
    index_b: tuple[int, ...]

    def position(self, label: str) -> int:
        key = normalise_class_name(label)
        for i, name in enumerate(self.labels):
            if normalise_class_name(name) == key:
                return i
        raise ConfigError(f"'{label}' is not one of the matched classes.")


def _index(names: Sequence[str], who: str, canon: Mapping[str, str] | None = None) -> dict[str, int]:
    """Output index by normalised class name; a name declared as an alias is filed under its class label."""
    out: dict[str, int] = {}
    given: dict[str, str] = {}
    for i, n in enumerate(names):
        key = normalise_class_name(n)
        key = (canon or {}).get(key, key)
        if key in out:
            same = "twice" if normalise_class_name(given[key]) == normalise_class_name(n) else \
                f"twice, as '{given[key]}' and '{n}' (declared names of one class)"
            raise ConfigError(f"{who} has the class name '{n}' {same} (indices {out[key]} and {i}).",
                              hint="Class names must be unique to match the two models' labels.")
        out[key], given[key] = i, n
    return out


def match_labels(names_a: Sequence[str], names_b: Sequence[str], labels: Sequence[str],
                 aliases: Mapping[str, Sequence[str]] | None = None) -> LabelMatch:
    """Map the condition source's class names onto both models; the models must share one label set.

    `aliases` (declared by the condition source, e.g. the CMNIST grid's `label_aliases`) gives, per label, the
    other names a model may use for that class: the grid's "3" is the demo classifier's "three". A model name
    counts as the declared label it is an alias of; nothing else is guessed."""
    aliases = aliases or {}
    canon: dict[str, str] = {}  # a normalised name -> the normalised condition label it stands for
    for label in labels:
        for name in (label, *aliases.get(label, ())):
            key = normalise_class_name(name)
            if canon.setdefault(key, normalise_class_name(label)) != normalise_class_name(label):
                raise ConfigError(f"The condition source declares '{name}' as a name of two classes.",
                                  hint="Each alias must belong to one class label.")
    a = _index(names_a, "Model A", canon)
    b = _index(names_b, "Model B", canon)
    only_a = [n for n in names_a if canon.get(normalise_class_name(n), normalise_class_name(n)) not in b]
    only_b = [n for n in names_b if canon.get(normalise_class_name(n), normalise_class_name(n)) not in a]
    if only_a or only_b:
        raise ConfigError("The two models do not have the same classes: "
                          + _listed(("Model B lacks", only_a), ("Model A lacks", only_b)) + ".",
                          hint="Compare models with the same label set (class names are matched, not indices), "
                               "or give class-name files that use the same names.")
    missing = [lab for lab in labels if normalise_class_name(lab) not in a]
    if missing:
        also = [f"'{lab}' (or {', '.join(repr(x) for x in aliases[lab])})" for lab in missing[:3] if aliases.get(lab)]
        raise ConfigError(f"Both models lack {_few(missing)}, which the condition source labels its images with"
                          + (f"; accepted names include {'; '.join(also)}" if also else "") + ".",
                          hint=f"The models' classes: {_few(list(names_a))}. Use a condition source whose labels "
                               "(or declared label aliases) name these classes.")
    return LabelMatch(tuple(labels), tuple(a[normalise_class_name(x)] for x in labels),
                      tuple(b[normalise_class_name(x)] for x in labels))


def _few(names: Sequence[str], n: int = 12) -> str:
    shown = ", ".join(f"'{x}'" for x in names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def _listed(*problems: tuple[str, Sequence[str]]) -> str:
    """'<what> <the names>' for each problem that has names, joined with '; '."""
    return "; ".join(f"{what} {_few(names)}" for what, names in problems if names)


# -- one zero-shot model, two prompt sets ---------------------------------------------------------------------
def load_prompt_set(path: str | Path, class_names: Sequence[str]) -> list[str]:
    """A prompt per class from a JSON object {class name: prompt} (every class once, names matched loosely)."""
    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"Prompt-set file not found: {p}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"The prompt-set file {p} is not readable JSON.", detail=repr(exc),
                          hint='Write {"class name": "a photo of ...", ...}.') from exc
    if not isinstance(data, dict) or not all(isinstance(v, str) and v.strip() for v in data.values()):
        raise ConfigError(f"The prompt-set file {p} must map each class name to a non-empty prompt.")
    return prompts_for_classes(data, class_names, where=str(p))


def prompts_for_classes(prompts: Mapping[str, str], class_names: Sequence[str], where: str = "the prompt set") \
        -> list[str]:
    given = {normalise_class_name(k): v for k, v in prompts.items()}
    missing = [n for n in class_names if normalise_class_name(n) not in given]
    unknown = [k for k in prompts if normalise_class_name(k) not in {normalise_class_name(n) for n in class_names}]
    if missing or unknown:
        raise ConfigError(f"In {where}: " + _listed(("no prompt for", missing),
                                                   ("prompts for classes the model does not have:", unknown)) + ".",
                          hint="Give exactly one prompt per class.")
    return [given[normalise_class_name(n)] for n in class_names]


@dataclass
class PromptedClassifier:
    """A zero-shot classifier seen through one prompt set: the seed's gender models A and B are one SigLIP
    with two sets of class prompts. Prompts are passed per call (`class_prompts=`), so two of these can share
    one loaded model without changing its state."""

    base: Any
    prompts: Sequence[str]
    name: str = "prompts"
    info: ModelInfo = field(init=False)

    def __post_init__(self) -> None:
        if not getattr(self.base, "zero_shot", False):
            raise ConfigError(f"{self.base.info.model_id} is not a zero-shot classifier; prompt sets need one "
                              "(CLIP, SigLIP, open_clip).")
        if len(self.prompts) != len(self.base.class_names):
            raise ConfigError(f"{len(self.prompts)} prompts for {len(self.base.class_names)} classes.")
        self.prompts = [str(p) for p in self.prompts]
        digest = hashlib.sha256("\n".join(self.prompts).encode("utf-8")).hexdigest()[:16]
        base = self.base.info
        self.info = ModelInfo(model_id=f"{base.model_id}#{self.name}", family=base.family,
                              revision=f"{base.revision}+prompts-{digest}",
                              extra={**dict(base.extra or {}), "prompts_sha256": digest, "prompts": list(self.prompts)})

    @property
    def class_names(self) -> list[str]:
        return list(self.base.class_names)

    zero_shot = True

    def class_prompt(self, index: int) -> str:
        return self.prompts[index]

    def predict_proba(self, images, *, class_prompts: Mapping[int, str] | None = None) -> np.ndarray:
        prompts = dict(enumerate(self.prompts))
        prompts.update(class_prompts or {})
        return self.base.predict_proba(images, class_prompts=prompts)

    def embed(self, images) -> np.ndarray:
        return self.base.embed(images)

    def predict_with_embeddings(self, images, *, class_prompts: Mapping[int, str] | None = None):
        from ...models.outputs import predict_with_embeddings

        prompts = dict(enumerate(self.prompts))
        prompts.update(class_prompts or {})
        return predict_with_embeddings(self.base, images, class_prompts=prompts)

    def preprocess(self, images):
        return self.base.preprocess(images)

    def forward_logits(self, pixel_values):
        return self.base.forward_logits(pixel_values, class_prompts=dict(enumerate(self.prompts)))
