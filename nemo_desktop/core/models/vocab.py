"""Class vocabularies: ImageNet-1k and the benchmark subsets, plus user class-name files.

    vocab = load_vocabulary("imagenet-r")       # 200 classes
    vocab.names[0], vocab.wnids[0]              # 'goldfish', 'n01443537'
    vocab.imagenet_mask()                       # the 1000-way logit columns this benchmark keeps
    names = read_class_file("my_classes.txt")   # one name per line

The data files live in `resources/vocab/` (sources and licenses in its README). Light module: no torch.
"""
from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from ..base.errors import ConfigError
from ..base.resources import resource_path


@dataclass(frozen=True)
class Vocabulary:
    """Class names in classifier-index order, with what ties them to ImageNet-1k."""

    name: str
    names: tuple[str, ...]  # readable names, e.g. 'great white shark'
    wnids: tuple[str, ...] | None = None  # one WordNet id per class where a class is one synset
    imagenet_indices: tuple[tuple[int, ...], ...] | None = None  # ImageNet-1k indices each class covers
    folders: tuple[str, ...] | None = None  # the dataset's folder name per class
    descriptions: tuple[str, ...] | None = None  # e.g. the full WordNet lemma string
    source: str = ""

    def __len__(self) -> int:
        return len(self.names)

    def index_of(self, key: str) -> int:
        """Class index for a readable name, wnid or folder name (first match)."""
        for column in (self.names, self.wnids, self.folders):
            if column and key in column:
                return column.index(key)
        raise KeyError(f"{key!r} is not a class of vocabulary {self.name!r}")

    def imagenet_mask(self) -> list[int]:
        """Sorted ImageNet-1k indices covered by this vocabulary (columns to keep of a 1000-way output)."""
        if self.imagenet_indices is None:
            raise ValueError(f"vocabulary {self.name!r} is not tied to ImageNet-1k")
        return sorted({i for group in self.imagenet_indices for i in group})

    def from_imagenet_index(self, imagenet_index: int) -> int | None:
        """The class of this vocabulary that covers an ImageNet-1k prediction, or None."""
        return self._imagenet_lookup.get(int(imagenet_index))

    @cached_property
    def _imagenet_lookup(self) -> dict[int, int]:
        return {i: c for c, group in enumerate(self.imagenet_indices or ()) for i in group}


_ALIASES = {"imagenet1k": "imagenet-1k", "imagenet": "imagenet-1k", "in1k": "imagenet-1k",
            "imagenetr": "imagenet-r", "objectnet": "objectnet", "imagenetd": "imagenet-d"}


def list_vocabularies() -> list[str]:
    return ["imagenet-1k", "imagenet-r", "objectnet", "imagenet-d"]


def _canonical(name: str) -> str:
    key = name.lower().replace("-", "").replace("_", "").replace(" ", "")
    try:
        return _ALIASES[key]
    except KeyError:
        raise ConfigError(f"Unknown class vocabulary '{name}'.",
                          hint=f"Known vocabularies: {', '.join(list_vocabularies())}; or give a class-name "
                               "file (one name per line).") from None


def _rows(filename: str) -> list[dict[str, str]]:
    with resource_path("vocab", filename).open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _ints(cell: str) -> tuple[int, ...]:
    return tuple(int(x) for x in cell.split(","))


def _first_lemma(lemmas: str) -> str:
    return lemmas.split(", ")[0].strip()


def load_vocabulary(name: str) -> Vocabulary:
    """One of `list_vocabularies()` (aliases such as 'imagenet1k' or 'ImageNet-R' accepted)."""
    return _load(_canonical(name))


def _wordnet(canonical: str, file: str, index_column: str, source: str) -> Vocabulary:
    """A vocabulary of WordNet synsets (one ImageNet-1k index each): named by their first lemma, in wnid folders."""
    rows = _rows(file)
    return Vocabulary(canonical, tuple(_first_lemma(r["wordnet_lemmas"]) for r in rows),
                      wnids=tuple(r["wnid"] for r in rows),
                      imagenet_indices=tuple((int(r[index_column]),) for r in rows),
                      folders=tuple(r["wnid"] for r in rows),
                      descriptions=tuple(r["wordnet_lemmas"] for r in rows),
                      source=source)


@lru_cache(maxsize=None)
def _load(canonical: str) -> Vocabulary:
    if canonical == "imagenet-1k":
        return _wordnet(canonical, "imagenet1k_classes.tsv", "index",
                        "ImageNet-1k (Keras class index + WordNet lemmas)")
    if canonical == "imagenet-r":
        return _wordnet(canonical, "imagenet_r_classes.tsv", "imagenet_index",
                        "ImageNet-R (hendrycks/imagenet-r eval.py)")
    if canonical == "objectnet":
        rows = _rows("objectnet_overlap_classes.tsv")
        return Vocabulary(canonical, tuple(r["objectnet_label"] for r in rows),
                          imagenet_indices=tuple(_ints(r["imagenet_indices"]) for r in rows),
                          folders=tuple(r["folder"] for r in rows),
                          descriptions=tuple(r["imagenet_keras_names"] for r in rows),
                          source="ObjectNet ∩ ImageNet-1k (ObjectNet mappings via mlfoundations/wise-ft)")
    rows = _rows("imagenet_d_classes.tsv")
    return Vocabulary(canonical, tuple(r["class_name"].replace("_", " ") for r in rows),
                      imagenet_indices=tuple(_ints(r["imagenet_indices"]) for r in rows),
                      folders=tuple(r["folder"] for r in rows),
                      descriptions=tuple(r["imagenet_keras_names"] for r in rows),
                      source="ImageNet-D (chenshuang-zhang/imagenet_d)")


def read_class_file(path: str | os.PathLike) -> list[str]:
    """Class names from a text file (one per line, in class-index order) or a JSON list / {index: name}.

    Trailing blank lines are ignored; a blank line between names is an error (it would shift indices)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"Class-name file not found: {p}", hint="Give a text file with one class name "
                          "per line, in the order of the model's outputs.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read the class-name file {p}.", hint="It must be a UTF-8 text file.",
                          detail=repr(exc)) from exc
    names = _parse_json_names(p, text) if p.suffix.lower() == ".json" else _parse_lines(p, text)
    if not names:
        raise ConfigError(f"The class-name file {p} lists no classes.",
                          hint="Write one class name per line, in the order of the model's outputs.")
    return names


def _parse_lines(p: Path, text: str) -> list[str]:
    lines = [line.strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if not line:
            raise ConfigError(f"Line {number} of the class-name file {p} is empty.",
                              hint="Every line must hold one class name; a blank line would shift the classes "
                                   "after it by one index.")
    return lines


def _parse_json_names(p: Path, text: str) -> list[str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"The class-name file {p} is not valid JSON.", detail=str(exc),
                          hint="Use a JSON list of names, or {\"0\": \"name\", ...}.") from exc
    if isinstance(data, dict):
        try:
            by_index = {int(k): v for k, v in data.items()}
        except ValueError:
            raise ConfigError(f"The keys of {p} must be class indices.",
                              hint="Use {\"0\": \"name\", \"1\": ...}.") from None
        if sorted(by_index) != list(range(len(by_index))):
            raise ConfigError(f"The class indices in {p} are not 0..{len(by_index) - 1} without gaps.",
                              hint="List every class index from 0 upwards exactly once.")
        data = [by_index[i] for i in range(len(by_index))]
    if not isinstance(data, list) or not all(isinstance(x, str) and x.strip() for x in data):
        raise ConfigError(f"The class-name file {p} must hold a list of non-empty names.",
                          hint="Use a JSON list of names, or {\"0\": \"name\", ...}.")
    return [x.strip() for x in data]
