"""What an analysis is run on, chosen the same way for every analysis: its `Inputs.data` kind says what to ask for
(a stored run, a reference index, a dataset folder, an image), and `call_args` turns the choice into the
arguments the analysis object is called with. The GUI's Analyses page and scripts use this; the CLI's commands
name the same things as positional arguments.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.sources import is_fiftyone_ref
from ..base.errors import ConfigError
from .spec import AnalysisSpec, in_sentence

# What to ask the user for, per data kind: (label, how it is chosen). "store": one of `data_choices`;
# "folder" / "file": a path; "none": nothing (the analysis' components and settings say it all).
DATA_PROMPTS: dict[str, tuple[str, str]] = {
    "run": ("Run", "store"),
    "index": ("Reference index", "store"),
    "dataset": ("Dataset folder (one sub-folder per class)", "folder"),
    "conditions": ("", "none"),  # made by the analysis' condition source (its `generator` component)
    "image": ("Image", "file"),
    "none": ("", "none"),
}
# The catalog kind a component role is loaded from (an embedder is a classifier model, a judge an MLLM).
ROLE_CATALOG_KIND = {"classifier": "classifier", "classifier_b": "classifier", "embedder": "classifier",
                     "mllm": "mllm", "judge": "mllm", "editor": "editor"}
# What a role needs of a model beyond its catalog kind, in words, with the catalog families that have it: the
# embedder (failure-modes) puts images and texts in one space, which only CLIP/SigLIP/open_clip classifiers do.
ROLE_CAPABILITY: dict[str, tuple[str, tuple[str, ...]]] = {
    "embedder": ("a joint image-text model (CLIP, SigLIP or open_clip)", ("hf-clip", "hf-siglip", "open_clip")),
}


def role_catalog_choices(role: str) -> tuple[list[str], dict[str, str]]:
    """The catalog ids a picker for `role` offers (those of its kind with the capability it needs), and the other
    ids of that kind with why they cannot fill it (a typed one is refused in place, not after loading)."""
    from ..models.catalog import list_catalog

    kind = ROLE_CATALOG_KIND.get(role)
    if kind is None:
        return [], {}
    offered, unfit = [], {}
    need = ROLE_CAPABILITY.get(role)
    for e in list_catalog(kind):
        if need is None or e.family in need[1]:
            offered.append(e.id)
        else:
            unfit[e.id] = f"is not {need[0]}"
    return offered, unfit


@dataclass(frozen=True)
class DataChoice:
    value: str  # what call_args receives
    label: str  # what the user reads


def data_prompt(spec: AnalysisSpec) -> tuple[str, str]:
    label, how = DATA_PROMPTS.get(spec.inputs.data, (spec.inputs.data, "folder"))
    return spec.data_label or label, how


def data_choices(spec: AnalysisSpec, store: Any) -> list[DataChoice]:
    """The stored runs or reference indexes `spec` can run on, newest first (empty for path-chosen data)."""
    data = spec.inputs.data
    if data == "run":
        out = []
        for r in store.list_runs():
            n = len(store.run_items(r["run_id"]))
            out.append(DataChoice(r["run_id"], f"{r['run_id']} ({r.get('kind') or 'run'}, {n} items, "
                                               f"{r.get('status') or 'unknown status'})"))
        return out
    if data == "index":
        from ..data.reference_index import ReferenceIndex

        return [DataChoice(r["index_id"], f"{Path(r['dataset_root']).name} with {r['classifier_id']} "
                                          f"({r['entries']} images)") for r in ReferenceIndex.list(store)]
    return []


def call_args(spec: AnalysisSpec, value: str | None) -> tuple:
    """The positional arguments `spec`'s analysis object is called with (before the JobContext)."""
    how = data_prompt(spec)[1]
    if how == "none":
        return ()
    if not value:
        raise ConfigError(f"Choose the {in_sentence(data_prompt(spec)[0])} to run '{spec.name}' on.")
    if how == "folder" and not is_fiftyone_ref(value) and not Path(value).is_dir():  # fiftyone:NAME names no folder
        raise ConfigError(f"{value} is not a folder.", hint="Choose an existing folder (or fiftyone:NAME for a "
                                                            "FiftyOne dataset).")
    if how == "file" and not Path(value).is_file():
        raise ConfigError(f"{value} is not a file.", hint="Choose an existing image file.")
    return (value,)
