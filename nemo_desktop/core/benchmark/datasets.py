"""Benchmark datasets in their published folder layouts, and how each one evaluates a classifier.

    ds = open_benchmark_dataset("imagenet-r", "/data/imagenet-r")
    adapted = ds.adapt(classifier)           # the classifier as this benchmark evaluates it
    adapted.classifier, adapted.labels       # run it; labels[i] is sample i's class in its class space

Layouts (the images are the user's; only class lists ship, see resources/vocab and
resources/benchmarks):
  * ImageNet-R: `imagenet-r/<wnid>/<image>` (200 wnid folders).
  * ObjectNet: `objectnet-1.0/images/<folder>/<image>` (313 folders; the 113 that overlap ImageNet-1k are
    used, the other 200 are skipped). Give `objectnet-1.0` or its `images` folder.
  * ImageNet-D: `ImageNet-D/{background,texture,material}/<class folder>/<image>` (113 class folders).
  * ImageNet validation subset (observation source only): `val/<wnid>/<image>`, or the flat Kaggle layout
    with `LOC_val_solution.csv` beside or inside the folder; 100 classes (mini-ImageNet's by default).
  * Generic: a folder with one sub-folder per class, or a CSV manifest `path,label`.

Protocols (`adapt`): ImageNet-1k classifiers are seen through a `ClassifierView` (views.py): ImageNet-R masks
the 1000 logits to its 200 classes; ObjectNet to the 125 columns of its 113 classes, a prediction being
correct when its column maps to the image's class; ImageNet-D keeps all 1000 columns and is correct when the
top-1 index is in the class's index list. Zero-shot classifiers get the benchmark's readable class names as
their prompts' class text (`set_class_names`).
"""
from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from ..base.errors import ConfigError
from ..base.images import is_image_file
from ..models.vocab import Vocabulary, load_vocabulary
from ..base.resources import resource_path
from .views import ClassifierView

IMAGENET_D_SPLITS = ("background", "texture", "material")
_WNID = re.compile(r"^n\d{8}$")


@dataclass(frozen=True)
class Sample:
    sample_id: str  # path relative to the dataset root, '/'-separated: stable across machines and shards
    path: Path
    label: int  # index into the dataset's class_names
    split: str | None = None


@dataclass
class Adapted:
    """A classifier as one benchmark evaluates it, with the samples' labels in its class space."""

    classifier: Any
    labels: list[int]  # aligned with dataset.samples
    from_imagenet: Callable[[int], int | None]  # ImageNet-1k index -> class in this space (reference images)
    protocol: str  # one line saying how correctness is decided


def is_imagenet1k_classifier(classifier: Any) -> bool:
    """True for a 1000-way classifier whose classes are ImageNet-1k's, in the standard order."""
    names = list(getattr(classifier, "class_names", []) or [])
    if len(names) != 1000 or getattr(classifier, "zero_shot", False):
        return False
    vocab = load_vocabulary("imagenet-1k")
    wnids = getattr(classifier, "wnids", None)
    if wnids is not None and list(wnids) == list(vocab.wnids):
        return True
    ours = [_norm(n.split(",")[0]) for n in names]
    agree = sum(a == _norm(b) for a, b in zip(ours, vocab.names))
    return agree >= 900  # a few renamed classes are fine; another 1000-class vocabulary is not


def _norm(name: str) -> str:
    return " ".join(re.sub(r"[_\-]+", " ", name).lower().split())


def _set_zero_shot_names(classifier: Any, names: Sequence[str]) -> None:
    if list(classifier.class_names) == list(names):
        return
    setter = getattr(classifier, "set_class_names", None)
    if not callable(setter):
        raise ConfigError(f"The zero-shot classifier {classifier.info.model_id} cannot switch its class names.",
                          hint="Use a zero-shot adapter with set_class_names (hf-clip, hf-siglip, open_clip).")
    setter(list(names))


def _images_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and is_image_file(p)
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def _class_dirs(root: Path) -> list[Path]:
    return sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))


def _existing_dir(root: str | Path, what: str, layout: str) -> Path:
    p = Path(root).expanduser().resolve()
    if not p.is_dir():
        raise ConfigError(f"The {what} folder was not found: {p}", hint=f"Give the folder laid out as {layout}.")
    return p


class BenchmarkDataset:
    """Samples of one benchmark with its class list; subclasses say how a classifier is evaluated on it."""

    kind = "dataset"
    display_name = "Dataset"
    criterion_key: str | None = None  # key in resources/benchmarks/criteria.json

    def __init__(self, root: Path, class_names: Sequence[str], samples: list[Sample],
                 notes: list[str] | None = None) -> None:
        self.root = root
        self.class_names = list(class_names)
        self.samples = samples
        self.notes = notes or []

    def __len__(self) -> int:
        return len(self.samples)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r}, {len(self)} images, {len(self.class_names)} classes)"

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "root": str(self.root), "images": len(self.samples),
                "classes": len(self.class_names), "notes": list(self.notes)}

    def adapt(self, classifier: Any, *, aggregate: str = "max") -> Adapted:
        raise NotImplementedError


class _VocabularyBenchmark(BenchmarkDataset):
    """A benchmark whose classes are a shipped vocabulary tied to ImageNet-1k indices."""

    vocabulary_name = ""
    keep_other_imagenet_classes = False  # ImageNet-D: the 1000-way output is not masked

    @property
    def vocabulary(self) -> Vocabulary:
        return load_vocabulary(self.vocabulary_name)

    def adapt(self, classifier: Any, *, aggregate: str = "max") -> Adapted:
        vocab = self.vocabulary
        labels = [s.label for s in self.samples]
        if getattr(classifier, "zero_shot", False):
            _set_zero_shot_names(classifier, vocab.names)
            return Adapted(classifier, labels, vocab.from_imagenet_index,
                           f"zero-shot over the {len(vocab)} {self.display_name} class names")
        if not is_imagenet1k_classifier(classifier):
            raise ConfigError(
                f"{classifier.info.model_id} has {len(classifier.class_names)} classes that are not ImageNet-1k's, "
                f"so it cannot be evaluated on {self.display_name}.",
                hint="Use an ImageNet-1k classifier or a zero-shot one (CLIP, SigLIP), or a generic folder dataset "
                     "labelled with the classifier's own class names.")
        names, groups = list(vocab.names), [tuple(g) for g in vocab.imagenet_indices]
        if self.keep_other_imagenet_classes:
            covered = {i for g in groups for i in g}
            imagenet = load_vocabulary("imagenet-1k")
            others = [i for i in range(1000) if i not in covered]
            names += [imagenet.names[i] for i in others]
            groups += [(i,) for i in others]
        view = ClassifierView(classifier, self.vocabulary_name, names, groups, aggregate=aggregate)
        columns = sum(len(g) for g in groups)
        rule = ("top-1 of all 1000 outputs in the class's index list" if self.keep_other_imagenet_classes else
                f"argmax over the {columns} masked logits, mapped to its class")
        return Adapted(view, labels, view.group_of, f"ImageNet-1k classifier: {rule}")


class ImageNetR(_VocabularyBenchmark):
    kind = "imagenet-r"
    display_name = "ImageNet-R"
    criterion_key = "imagenet-r"
    vocabulary_name = "imagenet-r"

    def __init__(self, root: str | Path) -> None:
        root = _existing_dir(root, "ImageNet-R", "imagenet-r/<wnid>/<image>")
        if (root / "imagenet-r").is_dir() and not any(_WNID.match(d.name) for d in _class_dirs(root)):
            root = root / "imagenet-r"
        vocab = load_vocabulary("imagenet-r")
        index = {w: i for i, w in enumerate(vocab.wnids)}
        samples, unknown = [], []
        for d in _class_dirs(root):
            if d.name not in index:
                unknown.append(d.name)
                continue
            samples += [Sample(p.relative_to(root).as_posix(), p, index[d.name]) for p in _images_under(d)]
        if not samples:
            raise ConfigError(f"No ImageNet-R images under {root}.",
                              hint="ImageNet-R has one folder per class named by its WordNet id "
                                   "(imagenet-r/n01443537/...).")
        notes = [f"ignored {len(unknown)} folder(s) that are not ImageNet-R classes: {', '.join(unknown[:5])}"] \
            if unknown else []
        super().__init__(root, vocab.names, samples, notes)


class ObjectNet(_VocabularyBenchmark):
    """ObjectNet's 113 ImageNet-overlap classes. Its images carry a red border: opening the dataset registers
    a crop of `border_crop` pixels per side for every image loaded from under its root (core/base/image_borders.py),
    as the standard ObjectNet loaders do."""

    kind = "objectnet"
    display_name = "ObjectNet"
    criterion_key = "objectnet"
    vocabulary_name = "objectnet"
    border_crop = 2

    def __init__(self, root: str | Path) -> None:
        root = _existing_dir(root, "ObjectNet", "objectnet-1.0/images/<folder>/<image>")
        if (root / "images").is_dir():
            root = root / "images"
        vocab = load_vocabulary("objectnet")
        index = {f: i for i, f in enumerate(vocab.folders)}
        all_folders = set(_objectnet_folders())
        samples, other, unknown = [], 0, []
        for d in _class_dirs(root):
            if d.name in index:
                samples += [Sample(p.relative_to(root).as_posix(), p, index[d.name]) for p in _images_under(d)]
            elif d.name in all_folders:
                other += 1
            else:
                unknown.append(d.name)
        if not samples:
            raise ConfigError(f"No ObjectNet images of the 113 ImageNet-overlap classes under {root}.",
                              hint="Give the objectnet-1.0 folder (or its images/ folder), which holds one folder "
                                   "per class (alarm_clock, backpack, ...).")
        notes = []
        if other:
            notes.append(f"skipped {other} ObjectNet class folder(s) that do not overlap ImageNet-1k")
        if unknown:
            notes.append(f"ignored {len(unknown)} folder(s) that are not ObjectNet classes: {', '.join(unknown[:5])}")
        super().__init__(root, vocab.names, samples, notes)
        from ..base.image_borders import register_border_crop

        register_border_crop(root, self.border_crop)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "border_crop": self.border_crop}


@lru_cache(maxsize=1)
def _objectnet_folders() -> tuple[str, ...]:
    with resource_path("benchmarks", "objectnet", "folder_to_objectnet_label.json").open(encoding="utf-8") as f:
        return tuple(json.load(f))


class ImageNetD(_VocabularyBenchmark):
    kind = "imagenet-d"
    display_name = "ImageNet-D"
    criterion_key = "imagenet-d"
    vocabulary_name = "imagenet-d"
    keep_other_imagenet_classes = True

    def __init__(self, root: str | Path, splits: Sequence[str] | None = None) -> None:
        root = _existing_dir(root, "ImageNet-D", "ImageNet-D/{background,texture,material}/<class folder>/<image>")
        splits = list(splits or IMAGENET_D_SPLITS)
        bad = [s for s in splits if s not in IMAGENET_D_SPLITS]
        if bad:
            raise ConfigError(f"Unknown ImageNet-D split(s): {', '.join(bad)}.",
                              hint=f"The splits are {', '.join(IMAGENET_D_SPLITS)}.")
        vocab = load_vocabulary("imagenet-d")
        index = {f: i for i, f in enumerate(vocab.folders)}
        samples, unknown, missing = [], [], []
        for split in splits:
            folder = root / split
            if not folder.is_dir():
                missing.append(split)
                continue
            for d in _class_dirs(folder):
                if d.name not in index:
                    unknown.append(f"{split}/{d.name}")
                    continue
                samples += [Sample(p.relative_to(root).as_posix(), p, index[d.name], split) for p in _images_under(d)]
        if not samples:
            raise ConfigError(f"No ImageNet-D images under {root} for the split(s) {', '.join(splits)}.",
                              hint="ImageNet-D is laid out as ImageNet-D/<split>/<class folder>/<image> with the "
                                   "splits background, texture and material.")
        notes = [f"split folder(s) not found: {', '.join(missing)}"] if missing else []
        if unknown:
            notes.append(f"ignored {len(unknown)} folder(s) that are not ImageNet-D classes: {', '.join(unknown[:5])}")
        self.splits = [s for s in splits if s not in missing]
        super().__init__(root, vocab.names, samples, notes)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "splits": list(self.splits)}


class GenericDataset(BenchmarkDataset):
    """A user's folder or CSV manifest (datasets.open_dataset) with the classifier's own protocol."""

    def __init__(self, path: str | Path, *, criterion: str | None = None, name: str | None = None) -> None:
        from ..data.datasets import open_dataset

        self._dataset = open_dataset(path)
        self.kind = self._dataset.kind
        self.display_name = name or Path(path).name
        self.criterion_text = criterion
        root = Path(self._dataset.root)
        base = root if root.is_dir() else root.parent
        samples = [Sample(_relative_id(it.path, base), Path(it.path), int(it.label)) for it in self._dataset.items]
        super().__init__(root, self._dataset.class_names, samples)

    def adapt(self, classifier: Any, *, aggregate: str = "max") -> Adapted:
        from ..data.datasets import LabelMapping

        if getattr(classifier, "zero_shot", False):
            readable = [_readable_folder(n) for n in self.class_names]
            _set_zero_shot_names(classifier, readable)
            mapping = LabelMapping(readable)
            return Adapted(classifier, [s.label for s in self.samples], _imagenet_by_name(mapping),
                           f"zero-shot over the dataset's {len(readable)} class names")
        mapped = self._dataset.with_class_names(classifier.class_names)
        by_path = {str(it.path): it.label for it in mapped.items}
        labels = [by_path[str(s.path)] for s in self.samples]
        if is_imagenet1k_classifier(classifier):
            return Adapted(classifier, labels, lambda i: int(i), "top-1 of the classifier's own classes")
        return Adapted(classifier, labels, _imagenet_by_name(LabelMapping(classifier.class_names)),
                       "top-1 of the classifier's own classes")


def _relative_id(path: Path, base: Path) -> str:
    try:
        return Path(path).relative_to(base).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _readable_folder(name: str) -> str:
    return " ".join(name.replace("_", " ").split())


def _imagenet_by_name(mapping) -> Callable[[int], int | None]:
    """ImageNet-1k index -> class of `mapping` matching its wnid or name (reference images of other datasets)."""
    vocab = load_vocabulary("imagenet-1k")
    table: dict[int, int | None] = {}

    def lookup(i: int) -> int | None:
        if i not in table:
            hit = mapping.resolve(vocab.wnids[i])
            if isinstance(hit, str):
                hit = mapping.resolve(vocab.names[i])
            table[i] = hit if isinstance(hit, int) else None
        return table[i]

    return lookup


# ------------------------------------------------------------------------------ ImageNet validation subset

@dataclass
class ImageNetSubset:
    """ImageNet validation images of a class subset: (path, ImageNet-1k index) pairs."""

    root: Path
    classes: str  # "mini-imagenet", "all", or the path of a wnid list
    items: list[tuple[Path, int]] = field(default_factory=list)
    per_class: int | None = None

    def describe(self) -> dict[str, Any]:
        return {"root": str(self.root), "classes": self.classes, "per_class": self.per_class,
                "images": len(self.items), "class_count": len({i for _, i in self.items})}


def subset_wnids(classes: str | Sequence[str]) -> list[str] | None:
    """The wnids of a class-subset spec: 'mini-imagenet' (shipped), 'all' (None), a file, or a list."""
    if not isinstance(classes, str):
        return [str(w) for w in classes]
    if classes == "all":
        return None
    path = resource_path("benchmarks", "imagenet_subset", "mini_imagenet_synsets.txt") \
        if classes == "mini-imagenet" else Path(classes).expanduser()
    if not path.is_file():
        raise ConfigError(f"ImageNet class subset '{classes}' is neither 'mini-imagenet', 'all' nor a file.",
                          hint="Give a text file with one WordNet id per line.")
    wnids = [w.strip() for w in path.read_text(encoding="utf-8").splitlines() if w.strip()]
    known = set(load_vocabulary("imagenet-1k").wnids)
    bad = [w for w in wnids if w not in known]
    if bad:
        raise ConfigError(f"{path} lists {len(bad)} id(s) that are not ImageNet-1k classes: {', '.join(bad[:5])}.",
                          hint="Write one ImageNet-1k WordNet id (n01440764, ...) per line.")
    return wnids


def open_imagenet_subset(root: str | Path, classes: str | Sequence[str] = "mini-imagenet",
                         per_class: int | None = None) -> ImageNetSubset:
    root = _existing_dir(root, "ImageNet validation", "val/<wnid>/<image> or a flat folder with LOC_val_solution.csv")
    vocab = load_vocabulary("imagenet-1k")
    index = {w: i for i, w in enumerate(vocab.wnids)}
    wanted = subset_wnids(classes)
    wanted_set = set(wanted) if wanted is not None else set(index)
    by_class: dict[int, list[Path]] = {}
    wnid_dirs = [d for d in _class_dirs(root) if _WNID.match(d.name)]
    if wnid_dirs:
        for d in wnid_dirs:
            if d.name in wanted_set and d.name in index:
                by_class[index[d.name]] = _images_under(d)
    else:
        solution = next((p for p in (root / "LOC_val_solution.csv", root.parent / "LOC_val_solution.csv")
                         if p.is_file()), None)
        if solution is None:
            raise ConfigError(f"{root} has neither wnid folders nor a LOC_val_solution.csv beside it.",
                              hint="Lay the validation images out as val/<wnid>/<image>, or keep Kaggle's "
                                   "LOC_val_solution.csv next to the flat folder.")
        files = {p.stem: p for p in root.iterdir() if p.is_file() and is_image_file(p)}
        with solution.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                wnid = (row.get("PredictionString") or "").split(" ")[0]
                p = files.get(row.get("ImageId", ""))
                if p is not None and wnid in wanted_set and wnid in index:
                    by_class.setdefault(index[wnid], []).append(p)
    items: list[tuple[Path, int]] = []
    for i in sorted(by_class):
        paths = sorted(by_class[i])
        items += [(p, i) for p in (paths[:per_class] if per_class else paths)]
    if not items:
        raise ConfigError(f"No ImageNet validation images of the chosen classes under {root}.",
                          hint="Check the folder and the class subset (imagenet_subset.classes).")
    label = classes if isinstance(classes, str) else f"{len(wanted or [])} listed classes"
    return ImageNetSubset(root, label, items, per_class)


# -------------------------------------------------------------------------------------------- factory

KINDS = ("imagenet-r", "objectnet", "imagenet-d", "folder", "csv")


def open_benchmark_dataset(kind: str, root: str | Path, *, splits: Sequence[str] | None = None,
                           criterion: str | None = None, name: str | None = None) -> BenchmarkDataset:
    key = kind.lower().replace("_", "-")
    if key == "imagenet-r":
        return ImageNetR(root)
    if key == "objectnet":
        return ObjectNet(root)
    if key == "imagenet-d":
        return ImageNetD(root, splits)
    if key in ("folder", "csv", "generic"):
        return GenericDataset(root, criterion=criterion, name=name)
    raise ConfigError(f"Unknown benchmark dataset kind '{kind}'.", hint=f"Known kinds: {', '.join(KINDS)}.")
