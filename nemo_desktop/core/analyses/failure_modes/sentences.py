"""The sentence set S: shipped sets, per-class sentences from the vocabulary, and the user's own files.

Specs (FailureModesConfig.sentence_sets): a shipped set's name ("general": resources/failure_modes/
sentences/general.v1.json), "classes" ("an image of a <class>." for every class of the classifier, as the
paper's ImageNet set), or a path to a .json file in the shipped format or a .txt file (one sentence per
line, '#' comments). Texts may hold "{class}", filled with the analysed class (or "object" for a whole-set
analysis). Duplicates (case and spacing ignored) keep their first occurrence. The set's sha256 over the
final texts (and their `requires`) keys the sentence embeddings and the result.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ...base.errors import ConfigError
from ...base.resources import resource_path

SHIPPED = {"general": ("failure_modes", "sentences", "general.v1.json")}
CLASSES_SPEC = "classes"
CLASS_TEMPLATE = "an image of a {}."


@dataclass(frozen=True)
class Sentence:
    text: str
    source: str  # set name or file name
    category: str = ""
    requires: dict | None = None  # attribute column -> value (relevance from a CSV manifest)

    def to_dict(self) -> dict:
        return {"text": self.text, "source": self.source, "category": self.category, "requires": self.requires}


@dataclass
class SentenceSet:
    sentences: list[Sentence]
    specs: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def texts(self) -> list[str]:
        return [s.text for s in self.sentences]

    @property
    def sha256(self) -> str:
        parts = [[s.text, s.requires] for s in self.sentences]
        return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=True).encode()).hexdigest()

    def filled(self, class_name: str | None) -> "SentenceSet":
        """'{class}' replaced by the analysed class ('object' without one); duplicates dropped again."""
        name = class_name or "object"
        return SentenceSet(_dedupe([Sentence(s.text.replace("{class}", name), s.source, s.category, s.requires)
                                    for s in self.sentences]), self.specs)


def _dedupe(sentences: list[Sentence]) -> list[Sentence]:
    seen, out = set(), []
    for s in sentences:
        key = " ".join(s.text.lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(s)
    return out


def load_sentence_sets(specs: Sequence[str], class_names: Sequence[str] = ()) -> SentenceSet:
    sentences: list[Sentence] = []
    for spec in specs:
        if spec in SHIPPED:
            sentences += _read_json(resource_path(*SHIPPED[spec]), spec)
        elif spec == CLASSES_SPEC:
            if not class_names:
                raise ConfigError("The 'classes' sentence set needs the classifier's class names.")
            sentences += [Sentence(CLASS_TEMPLATE.format(n), CLASSES_SPEC, "class") for n in class_names]
        else:
            path = Path(spec).expanduser()
            if not path.is_file():
                raise ConfigError(f"Sentence set '{spec}' is neither a shipped set nor a file.",
                                  hint=f"Use {', '.join([*SHIPPED, CLASSES_SPEC])} or the path of a .json/.txt file.")
            sentences += _read_json(path, path.name) if path.suffix.lower() == ".json" else _read_txt(path)
    out = _dedupe(sentences)
    if not out:
        raise ConfigError("The sentence sets hold no sentences.", hint="Check the files given as sentence sets.")
    return SentenceSet(out, list(specs))


def _read_json(path: Path, source: str) -> list[Sentence]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"Cannot read the sentence set {path}: {exc}",
                          hint='Expected UTF-8 JSON: {"sentences": [{"text": "..."}]}.') from exc
    items = doc.get("sentences") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise ConfigError(f"{path.name} has no 'sentences' list.", hint='Expected {"sentences": [{"text": "..."}]}.')
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"text": item}
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{path.name}: sentence {i + 1} has no text.")
        req = item.get("requires")
        if req is not None and not (isinstance(req, dict) and all(isinstance(k, str) for k in req)):
            raise ConfigError(f"{path.name}: sentence {i + 1}: 'requires' must map column names to values.")
        out.append(Sentence(text.strip(), source, str(item.get("category", "")),
                            {k: str(v) for k, v in req.items()} if req else None))
    return out


def _read_txt(path: Path) -> list[Sentence]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read the sentence file {path}: {exc}", hint="Save it as UTF-8 text.") from exc
    return [Sentence(ln.strip(), path.name) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
