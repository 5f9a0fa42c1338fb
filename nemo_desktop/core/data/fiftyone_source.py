"""A FiftyOne dataset as a NEMO dataset source (`fiftyone:NAME[#FIELD]`, see sources.py): the samples' image files
with the labels of a ground-truth `Classification` field, read through FiftyOne's API (values() reads two columns,
not the samples). Samples without a label in that field are left out and counted (`unlabelled`); the dataset's
declared classes for the field (dataset.classes[FIELD], else default_classes) join the vocabulary, as an empty class
folder does for a folder dataset. Needs the `fiftyone` extra, checked before FiftyOne is imported.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from ..base.errors import ConfigError
from .datasets import LabelledImageDataset
from .sources import fiftyone_ref, parse_fiftyone_ref


def dataset_names() -> list[str]:
    """The names of the FiftyOne datasets (what `fiftyone:NAME` may name), sorted; starts FiftyOne's database."""
    from ..base.extras import require

    require("fiftyone", "Listing FiftyOne datasets")
    import fiftyone as fo

    return sorted(fo.list_datasets())


class FiftyOneDataset(LabelledImageDataset):
    kind = "fiftyone"
    _label_word = "ground-truth labels"

    def __init__(self, ref: str, class_names: Sequence[str] | None = None, *, wnids: Sequence[str] | None = None,
                 label_map: Mapping[str, int | str] | None = None, skip_unmatched: bool = False) -> None:
        from ..base.extras import require

        name, field = parse_fiftyone_ref(ref)
        require("fiftyone", "A FiftyOne dataset as a source")
        import fiftyone as fo

        if not fo.dataset_exists(name):
            known = ", ".join(sorted(fo.list_datasets())[:20]) or "none"
            raise ConfigError(f"There is no FiftyOne dataset named '{name}' (datasets: {known}).",
                              hint="Check the name with fiftyone.list_datasets(), or export one with "
                                   "`nemo export fiftyone`.")
        ds = fo.load_dataset(name)
        fields = ds.get_field_schema()
        if field not in fields:
            labels = [k for k, f in fields.items()
                      if getattr(f, "document_type", None) is not None and f.document_type is fo.Classification]
            raise ConfigError(f"The FiftyOne dataset '{name}' has no field '{field}'.",
                              hint=f"Name its ground-truth field: fiftyone:{name}#FIELD (Classification fields: "
                                   f"{', '.join(labels) or 'none'}).")
        if getattr(fields[field], "document_type", None) is not fo.Classification:
            raise ConfigError(f"The field '{field}' of the FiftyOne dataset '{name}' is not a Classification "
                              "label field.", hint="Name a field that holds fiftyone.Classification labels.")
        paths, labels = ds.values("filepath"), ds.values(f"{field}.label")
        self.dataset_name, self.gt_field = name, field
        self.unlabelled = sum(1 for lab in labels if lab is None)
        self._declared = list(ds.classes.get(field) or ds.default_classes or [])
        raw = [(Path(p), str(lab)) for p, lab in zip(paths, labels) if lab is not None]
        if not raw:
            raise ConfigError(f"No sample of the FiftyOne dataset '{name}' has a label in '{field}'.",
                              hint="Give the field that holds the ground truth: fiftyone:NAME#FIELD.")
        super().__init__(fiftyone_ref(name, field), raw, class_names=class_names, wnids=wnids,  # type: ignore[arg-type]
                         label_map=label_map, skip_unmatched=skip_unmatched)

    def _extra_class_names(self) -> list[str]:
        return list(self._declared)

    def _copy_extra_from(self, other: LabelledImageDataset) -> None:
        for k in ("_declared", "dataset_name", "gt_field", "unlabelled"):
            setattr(self, k, getattr(other, k))
