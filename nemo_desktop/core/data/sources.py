"""Where a labelled dataset comes from, named by one string everywhere a dataset is asked for (`nemo index`,
`predict`, the analyses, the dataset browser):

  * a folder with one sub-folder per class, or a CSV manifest with a path,label header (datasets.py);
  * `fiftyone:NAME` or `fiftyone:NAME#FIELD`: a FiftyOne dataset by name, its images' file paths and the labels of
    its ground-truth field (a `Classification` field; `ground_truth` unless FIELD is given), read through FiftyOne's
    own API (fiftyone_source.py; needs the `fiftyone` extra).

`dataset_root(ref)` is the identity the results store records for a dataset (reference indexes are keyed by it).
"""
from __future__ import annotations

from pathlib import Path

FIFTYONE_PREFIX = "fiftyone:"
DEFAULT_GT_FIELD = "ground_truth"


def is_fiftyone_ref(ref) -> bool:
    return isinstance(ref, str) and ref.startswith(FIFTYONE_PREFIX)


def parse_fiftyone_ref(ref: str) -> tuple[str, str]:
    """'fiftyone:NAME#FIELD' -> (NAME, FIELD); the field defaults to ground_truth."""
    from ..base.errors import ConfigError

    body = ref[len(FIFTYONE_PREFIX):]
    name, _, field = body.partition("#")
    if not name.strip():
        raise ConfigError(f"'{ref}' names no FiftyOne dataset.",
                          hint="Write fiftyone:NAME (or fiftyone:NAME#FIELD for another ground-truth field).")
    return name, field.strip() or DEFAULT_GT_FIELD


def fiftyone_ref(name: str, field: str = DEFAULT_GT_FIELD) -> str:
    """The canonical reference (and dataset root) of a FiftyOne dataset and its ground-truth field."""
    return f"{FIFTYONE_PREFIX}{name}" + ("" if field == DEFAULT_GT_FIELD else f"#{field}")


def dataset_root(ref: str | Path) -> str:
    """The root the store records for a dataset reference (a resolved path, or the canonical fiftyone: reference)."""
    if is_fiftyone_ref(ref):
        return fiftyone_ref(*parse_fiftyone_ref(str(ref)))
    return str(Path(ref).expanduser().resolve())


def open_source(ref: str | Path, class_names=None, **kw):
    """The dataset a reference names (datasets.open_dataset, which knows every kind above)."""
    from .datasets import open_dataset

    return open_dataset(ref, class_names, **kw)
