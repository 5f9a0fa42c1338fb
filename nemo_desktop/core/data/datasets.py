"""Labelled image datasets: a list of (image path, label index) plus the class names the indices refer to.

Two layouts are read:
  * a folder with one sub-folder per class (`FolderDataset`), images found recursively inside each;
  * a CSV manifest with a `path,label` header (`CsvManifestDataset`); relative paths resolve against the
    CSV's folder, a label is a class name or an integer class index.

Without a vocabulary the classes are the dataset's own (sorted folder names / sorted label names). Given a
classifier's vocabulary (`class_names`, optionally its WordNet ids), dataset labels are mapped onto the
classifier's class indices by exact name, then WordNet id, then normalised name (case, `_`/`-`, and any of
the comma-separated synonyms such as "tench, Tinca tinca"), so that "correct" means pred == label.
Unmatched labels raise a ConfigError that lists them, unless `skip_unmatched=True`.
"""
from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from ..base.errors import ConfigError
from ..base.images import is_image_file

_WNID = re.compile(r"^n\d{8}$")


@dataclass(frozen=True)
class DatasetItem:
    path: Path
    label: int


def normalise_class_name(name: str) -> str:
    """'Great_White-Shark ' -> 'great white shark' (the loose key used after exact and WordNet-id matches)."""
    return " ".join(re.sub(r"[_\-]+", " ", name).lower().split())


def _imagenet1k_wnids_for(class_names: Sequence[str]) -> list[str] | None:
    """ImageNet-1k WordNet ids in class-index order, if `class_names` is (nearly) the ImageNet-1k vocabulary."""
    if len(class_names) != 1000:
        return None
    from ..models.vocab import load_vocabulary

    vocab = load_vocabulary("imagenet-1k")
    ours = [normalise_class_name(n.split(",")[0]) for n in class_names]
    theirs = [normalise_class_name(n) for n in vocab.names]
    agree = sum(a == b for a, b in zip(ours, theirs))
    return list(vocab.wnids) if vocab.wnids and agree >= 900 else None  # a few renamed classes are fine


@dataclass
class LabelMapping:
    """Maps raw dataset labels (folder names, CSV labels) onto indices of a class vocabulary."""

    class_names: Sequence[str]
    wnids: Sequence[str] | None = None
    overrides: Mapping[str, int | str] = field(default_factory=dict)  # raw label -> index or class name

    def __post_init__(self) -> None:
        self._exact = {}
        for i, n in enumerate(self.class_names):
            self._exact.setdefault(n, i)
        self._wnid = {w: i for i, w in enumerate(self.wnids or [])}
        loose: dict[str, set[int]] = {}
        for i, n in enumerate(self.class_names):
            for variant in {n, *n.split(",")}:
                key = normalise_class_name(variant)
                if key:
                    loose.setdefault(key, set()).add(i)
        self._loose = loose

    def resolve(self, raw: str) -> int | str:
        """The class index for `raw`, or a string saying why there is none."""
        if raw in self.overrides:
            target = self.overrides[raw]
            if isinstance(target, int):
                if 0 <= target < len(self.class_names):
                    return target
                return f"mapped to index {target}, outside 0..{len(self.class_names) - 1}"
            if target in self._exact:
                return self._exact[target]
            return f"mapped to unknown class {target!r}"
        if raw in self._exact:
            return self._exact[raw]
        if raw in self._wnid:
            return self._wnid[raw]
        hits = self._loose.get(normalise_class_name(raw), set())
        if len(hits) == 1:
            return next(iter(hits))
        if len(hits) > 1:
            names = ", ".join(repr(self.class_names[i]) for i in sorted(hits)[:4])
            return f"ambiguous: matches {names}"
        return "no matching class"


class UnmatchedLabelsError(ConfigError):
    """Labels of a dataset that match none of the classifier's classes. Its hint names the skip option of
    `nemo index` and the API; a caller without that option replaces the hint with its own."""


def _unmatched_error(kind: str, unmatched: dict[str, str], vocab_size: int) -> ConfigError:
    shown = sorted(unmatched.items())[:20]
    listing = "; ".join(f"{k!r} ({why})" for k, why in shown)
    more = f" and {len(unmatched) - len(shown)} more" if len(unmatched) > len(shown) else ""
    return UnmatchedLabelsError(
        f"{len(unmatched)} {kind} do not match any of the classifier's {vocab_size} classes: {listing}{more}.",
        hint="Rename them to the classifier's class names or WordNet ids, give an explicit label map, or skip "
             "the unmatched classes (skip_unmatched=True / --skip-unmatched).")


class LabelledImageDataset:
    """Common part: raw (path, raw label) pairs resolved to label indices against a class list."""

    kind = "dataset"

    def __init__(self, root: Path, raw_items: list[tuple[Path, str]], *, class_names: Sequence[str] | None,
                 wnids: Sequence[str] | None, label_map: Mapping[str, int | str] | None,
                 skip_unmatched: bool) -> None:
        self.root = root
        self._raw_items = raw_items
        self._options = dict(wnids=wnids, label_map=label_map, skip_unmatched=skip_unmatched)
        self.skipped_labels: dict[str, str] = {}  # raw label -> why it was skipped (skip_unmatched)
        if class_names is None:
            self.class_names, self.items = self._own_classes(raw_items)
            self.vocabulary_given = False
        else:
            self.class_names = list(class_names)
            self.items = self._map_to_vocabulary(raw_items, class_names, wnids, label_map or {}, skip_unmatched)
            self.vocabulary_given = True

    # -- label resolution ---------------------------------------------------------------------------
    def _own_classes(self, raw_items: list[tuple[Path, str]]) -> tuple[list[str], list[DatasetItem]]:
        names = sorted({raw for _, raw in raw_items} | set(self._extra_class_names()))
        index = {n: i for i, n in enumerate(names)}
        return names, [DatasetItem(p, index[raw]) for p, raw in raw_items]

    def _extra_class_names(self) -> list[str]:
        """Classes that exist without items (an empty class folder); overridden by FolderDataset."""
        return []

    def _map_to_vocabulary(self, raw_items, class_names, wnids, label_map, skip_unmatched) -> list[DatasetItem]:
        if wnids is None:
            raws = {raw for _, raw in raw_items}
            if raws and all(_WNID.match(r) for r in raws):
                wnids = _imagenet1k_wnids_for(class_names)  # folders named by WordNet id, ImageNet-1k classifier
        mapping = LabelMapping(class_names, wnids, label_map)
        resolved = {raw: mapping.resolve(raw) for raw in {raw for _, raw in raw_items} | set(self._extra_class_names())}
        unmatched = {raw: why for raw, why in resolved.items() if isinstance(why, str)}
        if unmatched and not skip_unmatched:
            raise _unmatched_error(self._label_word, unmatched, len(class_names))
        self.skipped_labels = unmatched
        return [DatasetItem(p, resolved[raw]) for p, raw in raw_items if not isinstance(resolved[raw], str)]

    _label_word = "labels"

    def with_class_names(self, class_names: Sequence[str], *, wnids: Sequence[str] | None = None,
                         label_map: Mapping[str, int | str] | None = None,
                         skip_unmatched: bool | None = None) -> "LabelledImageDataset":
        """The same images with labels mapped onto another vocabulary (no re-scan of the disk)."""
        opts = dict(self._options)
        if wnids is not None:
            opts["wnids"] = wnids
        if label_map is not None:
            opts["label_map"] = label_map
        if skip_unmatched is not None:
            opts["skip_unmatched"] = skip_unmatched
        clone = object.__new__(type(self))
        clone._copy_extra_from(self)
        LabelledImageDataset.__init__(clone, self.root, self._raw_items, class_names=class_names, **opts)
        return clone

    def _copy_extra_from(self, other: "LabelledImageDataset") -> None:
        pass

    # -- sequence interface -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[DatasetItem]:
        return iter(self.items)

    def __getitem__(self, i: int) -> DatasetItem:
        return self.items[i]

    @property
    def paths(self) -> list[Path]:
        return [it.path for it in self.items]

    @property
    def labels(self) -> list[int]:
        return [it.label for it in self.items]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r}, {len(self)} images, {len(self.class_names)} classes)"


class FolderDataset(LabelledImageDataset):
    """`root/<class name>/**/<image>`; hidden folders and non-image files are ignored."""

    kind = "folder"
    _label_word = "class folders"

    def __init__(self, root: str | Path, class_names: Sequence[str] | None = None, *,
                 wnids: Sequence[str] | None = None, label_map: Mapping[str, int | str] | None = None,
                 skip_unmatched: bool = False) -> None:
        root = Path(root).expanduser().resolve()
        if not root.is_dir():
            raise ConfigError(f"Dataset folder not found: {root}",
                              hint="Give a folder that holds one sub-folder per class.")
        folders = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
        if not folders:
            raise ConfigError(f"{root} has no class sub-folders.",
                              hint="Put the images of each class in a sub-folder named after the class.")
        self._folder_names = [d.name for d in folders]
        raw: list[tuple[Path, str]] = []
        for d in folders:
            # Every entry named like an image, whatever it is: a FIFO, a dangling link, an unreadable file or a
            # folder called "x.jpg" becomes that file's error when it is read, never a silent omission.
            files = sorted(p for p in d.rglob("*")
                           if is_image_file(p)
                           and not any(part.startswith(".") for part in p.relative_to(d).parts))
            raw.extend((p, d.name) for p in files)
        super().__init__(root, raw, class_names=class_names, wnids=wnids, label_map=label_map,
                         skip_unmatched=skip_unmatched)

    def _extra_class_names(self) -> list[str]:
        return self._folder_names

    def _copy_extra_from(self, other: "LabelledImageDataset") -> None:
        self._folder_names = list(other._folder_names)  # type: ignore[attr-defined]


class CsvManifestDataset(LabelledImageDataset):
    """A CSV with a `path,label` header (other columns ignored). The root identifying it is the CSV file."""

    kind = "csv"

    def __init__(self, csv_path: str | Path, class_names: Sequence[str] | None = None, *,
                 wnids: Sequence[str] | None = None, label_map: Mapping[str, int | str] | None = None,
                 skip_unmatched: bool = False) -> None:
        csv_path = Path(csv_path).expanduser().resolve()
        if not csv_path.is_file():
            raise ConfigError(f"Manifest not found: {csv_path}", hint="Give a CSV file with a path,label header.")
        base = csv_path.parent
        raw: list[tuple[Path, str]] = []
        try:
            with open(csv_path, newline="", encoding="utf-8-sig") as f:
                reader = csv.DictReader(f)
                fields = {(h or "").strip().lower(): h for h in reader.fieldnames or []}
                if "path" not in fields or "label" not in fields:
                    raise ConfigError(
                        f"{csv_path.name} has no 'path' and 'label' columns (header: {reader.fieldnames}).",
                        hint="The first line of the manifest must be a header naming the columns path,label.")
                for line_no, row in enumerate(reader, start=2):
                    p, label = (row.get(fields["path"]) or "").strip(), (row.get(fields["label"]) or "").strip()
                    if not p and not label:
                        continue
                    if not p or not label:
                        raise ConfigError(f"{csv_path.name}, line {line_no}: empty path or label.",
                                          hint="Every row needs both a path and a label.")
                    path = Path(p).expanduser()
                    # normpath, not resolve(): no file-system call per row (100k-row manifests open in 0.x s).
                    raw.append((Path(os.path.normpath(path if path.is_absolute() else base / path)), label))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ConfigError(f"Cannot read the manifest {csv_path}: {exc}",
                              hint="Save it as UTF-8 CSV with a path,label header.") from exc
        if not raw:
            raise ConfigError(f"{csv_path.name} lists no images.", hint="Add rows of path,label below the header.")
        super().__init__(csv_path, raw, class_names=class_names, wnids=wnids, label_map=label_map,
                         skip_unmatched=skip_unmatched)

    def _own_classes(self, raw_items):
        raws = {raw for _, raw in raw_items}
        if all(r.isdigit() for r in raws):  # integer labels without a vocabulary: the indices are the classes
            n = max(int(r) for r in raws) + 1
            return [str(i) for i in range(n)], [DatasetItem(p, int(raw)) for p, raw in raw_items]
        return super()._own_classes(raw_items)

    def _map_to_vocabulary(self, raw_items, class_names, wnids, label_map, skip_unmatched):
        # An integer label that is not itself a class name is an index into the vocabulary.
        label_map = dict(label_map)
        names = set(class_names)
        for _, raw in raw_items:
            if raw.isdigit() and raw not in names and raw not in label_map:
                label_map[raw] = int(raw)
        return super()._map_to_vocabulary(raw_items, class_names, wnids, label_map, skip_unmatched)


def open_dataset(path: str | Path, class_names: Sequence[str] | None = None, **kw) -> LabelledImageDataset:
    """A folder -> FolderDataset, a .csv file -> CsvManifestDataset, `fiftyone:NAME[#FIELD]` -> a FiftyOne dataset
    (sources.py); `kw` as for those classes."""
    from .sources import is_fiftyone_ref

    if is_fiftyone_ref(path):
        from .fiftyone_source import FiftyOneDataset

        return FiftyOneDataset(str(path), class_names, **kw)
    p = Path(path).expanduser()
    if p.is_dir():
        return FolderDataset(p, class_names, **kw)
    if p.is_file():
        if p.suffix.lower() == ".csv":
            return CsvManifestDataset(p, class_names, **kw)
        raise ConfigError(f"{p} is neither a folder nor a .csv manifest.",
                          hint="Give a folder with one sub-folder per class, or a CSV file with a path,label "
                               "header.")
    raise ConfigError(f"Dataset not found: {p}", hint="Check the path.")
