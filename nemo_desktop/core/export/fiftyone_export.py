"""NEMO's findings as a FiftyOne dataset (the `fiftyone` extra), for FiftyOne's app: its grid, filters on any field,
tags, saved views and embedding scatter.

    summary = export_to_fiftyone(store, "path/to/dataset", "my-classifier", name="my-findings")

What is written, from the per-image table (table.py; one sample per row, matched by file path):

  * `ground_truth` and `predictions`: fiftyone.Classification labels (the prediction with its confidence);
  * every table column as a sample field `nemo_<column>` with the schema's type and description (schema.py);
  * each failure mode as a sample tag `nemo:<mode id>` and a saved view of its images;
  * the classifier's embeddings from the reference index as a brain visualization (`nemo_embeddings`) when
    fiftyone.brain is installed (UMAP when umap-learn is installed, else PCA; the method is recorded).

Exporting again into the same name updates the samples in place: samples are matched by file path, the fields are
overwritten, NEMO's previous tags and saved views are replaced, and new images are added; nothing is duplicated.
The table's metadata (index, classifier, which stored results were used) goes into the dataset's `info["nemo"]`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError
from ..base.job_context import JobContext, null_context
from . import schema
from .table import PerImageTable

FIELD_PREFIX = "nemo_"
TAG_PREFIX = "nemo:"
VIEW_PREFIX = "nemo "
BRAIN_KEY = "nemo_embeddings"
GT_FIELD, PRED_FIELD = "ground_truth", "predictions"


def field_name(column: str) -> str:
    return FIELD_PREFIX + column


def _field_type(logical: str):
    import fiftyone as fo

    scalar = {schema.STRING: fo.StringField, schema.INT: fo.IntField, schema.FLOAT: fo.FloatField,
              schema.BOOL: fo.BooleanField}
    if logical.startswith("list<"):
        return fo.ListField, scalar[logical[5:-1]]
    return scalar[logical], None


def _declare_fields(ds) -> None:
    """Every NEMO field with its type and description, so a column that is null everywhere still exists."""
    import fiftyone as fo

    have = ds.get_field_schema()
    for c in schema.COLUMNS:
        if c.name == "path":
            continue
        name = field_name(c.name)
        if name in have:
            continue
        ftype, sub = _field_type(c.type)
        ds.add_sample_field(name, ftype, subfield=sub, description=c.doc)
    for name in (GT_FIELD, PRED_FIELD):
        if name not in have:
            ds.add_sample_field(name, fo.EmbeddedDocumentField, embedded_doc_type=fo.Classification)


def export_to_fiftyone(store, dataset: str | Path, classifier: str | None = None, *, name: str,
                       competency_key: str | None = None, failure_modes_key: str | None = None,
                       fix_key: str | None = None, visualization: str | None = None, batch_rows: int = 4096,
                       ctx: JobContext | None = None) -> dict[str, Any]:
    """Create or update the FiftyOne dataset `name`; returns what was done (samples added/updated, modes, views,
    whether the embeddings visualization was computed and why not)."""
    from ..base.extras import require

    require("fiftyone", "Exporting to FiftyOne")
    if not name or not name.strip():
        raise ConfigError("Give the FiftyOne dataset a name.", hint="--name NAME")
    ctx = ctx or null_context()
    table = PerImageTable.open(store, dataset, classifier, competency_key=competency_key,
                               failure_modes_key=failure_modes_key, fix_key=fix_key)
    import fiftyone as fo

    existed = fo.dataset_exists(name)
    ds = fo.load_dataset(name) if existed else fo.Dataset(name, persistent=True)
    _declare_fields(ds)
    known = set(ds.values("filepath"))
    added = updated = 0
    modes: dict[str, tuple[str, list[str]]] = {}  # mode id -> (sentence, paths)
    for cols in table.batches(batch_rows, ctx):
        paths = cols["path"]
        new = [p for p in paths if p not in known]
        if new:
            ds.add_samples([fo.Sample(filepath=p) for p in new], progress=False)
            known.update(new)
        added += len(new)
        updated += len(paths) - len(new)
        _set_batch(ds, cols)
        for i, p in enumerate(paths):
            for mid, sentence in zip(cols["failure_mode_ids"][i] or [], cols["failure_mode_sentences"][i] or []):
                modes.setdefault(mid, (sentence, []))[1].append(p)
    views = _tags_and_views(ds, modes)
    ds.info["nemo"] = {**table.metadata(), "notes": json.dumps(table.notes)}
    ds.save()
    vis = _visualization(ds, store, table, visualization, ctx)
    return {"dataset": name, "created": not existed, "samples": len(ds), "added": added, "updated": updated,
            "failure_modes": len(modes), "saved_views": views, "visualization": vis, "notes": list(table.notes),
            "index_id": table.head.index_id}


def _set_batch(ds, cols: dict[str, list]) -> None:
    import fiftyone as fo

    paths = cols["path"]
    for c in schema.COLUMNS:
        if c.name == "path":
            continue
        ds.set_values(field_name(c.name), dict(zip(paths, cols[c.name])), key_field="filepath")
    gt = {p: None if t is None else fo.Classification(label=t) for p, t in zip(paths, cols["true_label"])}
    pred = {p: None if lab is None else fo.Classification(label=lab, confidence=conf)
            for p, lab, conf in zip(paths, cols["pred_label"], cols["prob_pred"])}
    ds.set_values(GT_FIELD, gt, key_field="filepath")
    ds.set_values(PRED_FIELD, pred, key_field="filepath")


def _view_name(mode_id: str) -> str:
    key, group, number = mode_id.split("/", 2)[0], *mode_id.split("/", 1)[1].rsplit("/", 1)
    where = "" if group == "all" else f" in {group}"
    return f"{VIEW_PREFIX}failure mode {number}{where} ({key[:8]})"


def _tags_and_views(ds, modes: dict[str, tuple[str, list[str]]]) -> list[str]:
    """NEMO's previous tags and saved views are replaced by this export's (a re-export shows the current modes)."""
    old_tags = [t for t in ds.distinct("tags") if t.startswith(TAG_PREFIX)]
    if old_tags:
        ds.untag_samples(old_tags)
    for v in ds.list_saved_views():
        if v.startswith(VIEW_PREFIX):
            ds.delete_saved_view(v)
    views = []
    for mid, (sentence, paths) in modes.items():
        tag = TAG_PREFIX + mid
        ds.select_by("filepath", paths).tag_samples(tag)
        name = _view_name(mid)
        ds.save_view(name, ds.match_tags(tag), description=sentence[:1000], overwrite=True)
        views.append(name)
    return views


def _visualization(ds, store, table: PerImageTable, method: str | None, ctx: JobContext) -> dict[str, Any]:
    import importlib.util

    if importlib.util.find_spec("fiftyone.brain") is None:
        return {"computed": False, "why": "fiftyone.brain is not installed"}
    if not table.head.features_array:
        return {"computed": False, "why": "the reference index has no embeddings"}
    import fiftyone.brain as fob
    import numpy as np

    if method is None:
        method = "umap" if importlib.util.find_spec("umap") is not None else "pca"
    features = store.open_array(table.head.features_array)
    # The indexed samples and their matrix rows, in one order.
    view = ds.exists(field_name("embedding_row"))
    rows = np.asarray(view.values(field_name("embedding_row")), np.int64)
    if not len(rows):
        return {"computed": False, "why": "no sample has an embedding"}
    embeddings = np.asarray(features[np.sort(rows)], np.float32)[np.argsort(np.argsort(rows))]
    if BRAIN_KEY in ds.list_brain_runs():
        ds.delete_brain_run(BRAIN_KEY)
    ctx.progress("Computing the embeddings visualization", 0, None)
    fob.compute_visualization(view, embeddings=embeddings, brain_key=BRAIN_KEY, method=method, seed=0,
                              progress=False)
    return {"computed": True, "brain_key": BRAIN_KEY, "method": method, "points": int(len(rows))}


def default_name(index_id: str, dataset_root: str | None) -> str:
    """The FiftyOne dataset "Open in FiftyOne" writes for an index: one per index, updated on every opening."""
    stem = Path(dataset_root or "dataset").name or "dataset"
    return f"nemo-{stem}-{index_id[:8]}"


def view_for_mode(mode_id: str) -> str:
    """The saved view a failure mode (its table id) is exported as."""
    return _view_name(mode_id)


def open_in_app(store, index_id: str, dataset_root: str | None = None, *, mode_id: str | None = None,
                failure_modes_key: str | None = None, ctx: JobContext | None = None) -> dict[str, Any]:
    """The window's "Open in FiftyOne": export (or update) the index's dataset, start the app without opening a
    browser (the window opens its URL), showing the failure mode's saved view when `mode_id` is given."""
    name = default_name(index_id, dataset_root)
    done = export_to_fiftyone(store, index_id, name=name, failure_modes_key=failure_modes_key, ctx=ctx)
    view = view_for_mode(mode_id) if mode_id else None
    if view is not None and view not in done["saved_views"]:
        raise ConfigError("The failure mode is not among the exported ones (the failure-modes result it came from "
                          "is not the one exported).", hint="Open the failure mode from its result again.")
    session = launch(name, wait=False, view=view)
    return {**done, "view": view, "url": getattr(session, "url", None), "session": session}


def launch(name: str, *, wait: bool = True, view: str | None = None):
    """Open the FiftyOne app on the dataset (blocks until the app is closed when `wait`)."""
    from ..base.extras import require

    require("fiftyone", "Opening FiftyOne")
    import fiftyone as fo

    ds = fo.load_dataset(name)
    session = fo.launch_app(ds, view=ds.load_saved_view(view) if view else None, auto=wait)
    if wait:
        session.wait()
    return session
