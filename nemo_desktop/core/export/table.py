"""The per-image table: one row per image of a dataset for a classifier, with every NEMO fact the store holds for
it (columns: schema.py). Rows are produced in batches straight from the store, so a table of 10^5 images is written
without ever holding its rows (benchmarks/table_export.py measures the peak memory).

    table = PerImageTable.open(store, "path/to/dataset", classifier="my-classifier")
    table.write("findings.parquet")        # .parquet (pyarrow), .csv or .jsonl
    df = table.to_pandas()                  # the same columns, nullable dtypes

Rows: the classifier's reference index (one per indexed image, in path order), then the dataset's images the index
does not hold yet (found on disk when the dataset can still be read), with only their path and true label.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..base.errors import ConfigError, NemoError
from ..base.job_context import JobContext, null_context
from . import schema
from .facts import StoredFacts, gather

BATCH_ROWS = 4096


@dataclass
class IndexHead:
    """What the table needs to know about an index, without loading its entries."""

    index_id: str
    dataset_root: str | None
    classifier_id: str | None
    classifier_revision: str | None
    class_names: list[str]
    features_array: str | None
    entries: int = 0


def _index_heads(store) -> list[dict]:
    from ..data.reference_index import ReferenceIndex

    return ReferenceIndex.list(store)


def _dataset_root_text(dataset: str | Path) -> str:
    from ..data.sources import dataset_root

    return dataset_root(dataset)


def resolve_index(store, dataset: str | Path, classifier: str | None) -> IndexHead:
    """The reference index of `dataset` (its folder, CSV, fiftyone:NAME source, or an index id) built with
    `classifier` (a catalog id or the id the index recorded); the only one of the dataset when none is named."""
    rows = _index_heads(store)
    by_id = [r for r in rows if r["index_id"] == str(dataset)]
    if not by_id:
        root = _dataset_root_text(dataset)
        by_id = [r for r in rows if r["dataset_root"] == root]
        if not by_id:
            raise ConfigError(f"The dataset {dataset} has no reference index in the results store.",
                              hint="Run `nemo index DATASET --classifier ID` first: the table's predictions, top-k "
                                   "and embeddings come from the index.")
        if classifier:
            wanted = _classifier_ids(classifier)
            matching = [r for r in by_id if r["classifier_id"] in wanted]
            if not matching:
                have = ", ".join(sorted({r["classifier_id"] for r in by_id}))
                raise ConfigError(f"The dataset {dataset} was not indexed with the classifier {classifier} "
                                  f"(its indexes: {have}).",
                                  hint=f"Run `nemo index {dataset} --classifier {classifier}`, or name one of those.")
            by_id = matching
    if len(by_id) > 1:
        listing = "; ".join(f"{r['index_id']} ({r['classifier_id']} rev {r['classifier_revision']})" for r in by_id)
        raise ConfigError(f"Several reference indexes match: {listing}.",
                          hint="Give the classifier with -c, or the index id instead of the dataset.")
    r = by_id[0]
    with store.transaction() as conn:
        names, matrix = conn.execute("SELECT class_names, features_array FROM indexes WHERE index_id=?",
                                     (r["index_id"],)).fetchone()
    return IndexHead(r["index_id"], r["dataset_root"], r["classifier_id"], r["classifier_revision"],
                     json.loads(names or "[]"), matrix, int(r["entries"]))


def _classifier_ids(ref: str) -> set[str]:
    """The ids an index may have recorded for a classifier reference: the reference itself and, for a catalog
    entry, the model id its loader reports (the catalog id)."""
    ids = {ref}
    try:
        from ..models.catalog import resolve_model_ref

        spec = resolve_model_ref(ref, "classifier")
        ids |= {v for v in (getattr(spec, "model_id", None), getattr(spec, "source", None)) if v}
    except NemoError:
        pass
    return ids


@dataclass
class PerImageTable:
    store: Any
    head: IndexHead
    facts: StoredFacts
    include_unindexed: bool = True
    notes: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, store, dataset: str | Path, classifier: str | None = None, *, competency_key: str | None = None,
             failure_modes_key: str | None = None, fix_key: str | None = None,
             include_unindexed: bool = True) -> "PerImageTable":
        head = resolve_index(store, dataset, classifier)
        _consolidate_if_pending(store, head.index_id)
        index_like = _IndexFacts(head)
        facts = gather(store, index_like, competency_key=competency_key, failure_modes_key=failure_modes_key,
                       fix_key=fix_key)
        return cls(store, head, facts, include_unindexed, list(facts.notes))

    # -- metadata ---------------------------------------------------------------------------------------------
    def metadata(self) -> dict[str, str]:
        """Table-level facts (Parquet metadata, with `notes` added once the rows are written; the CSV/JSONL writers
        return them to the caller)."""
        from ... import __version__

        return {"nemo_version": __version__, "index_id": self.head.index_id,
                "dataset_root": self.head.dataset_root or "", "classifier_id": self.head.classifier_id or "",
                "classifier_revision": self.head.classifier_revision or "",
                "class_names": json.dumps(self.head.class_names), "sources": json.dumps(self.facts.sources)}

    # -- rows -------------------------------------------------------------------------------------------------
    def batches(self, batch_rows: int = BATCH_ROWS, ctx: JobContext | None = None) -> Iterator[dict[str, list]]:
        """Column batches (name -> list of at most `batch_rows` values), in schema order."""
        ctx = ctx or null_context()
        seen = 0
        total = self.head.entries
        for rows in _index_rows(self.store, self.head.index_id, batch_rows):
            ctx.check_cancelled()
            cols = _empty_columns()
            for r in rows:
                self._add(cols, *r)
            seen += len(rows)
            ctx.progress("Writing the per-image table", seen, total)
            yield cols
        if self.include_unindexed:
            yield from self._unindexed(batch_rows, ctx)

    def _add(self, cols: dict[str, list], path, sha, label, pred, prob_label, prob_pred, correct, row, entropy,
             top5) -> None:
        names = self.head.class_names
        top = json.loads(top5) if top5 else []
        values = {"path": path, "image_sha256": sha, "true_index": int(label), "true_label": _name(names, label),
                  "pred_index": int(pred), "pred_label": _name(names, pred), "prob_pred": _f(prob_pred),
                  "prob_true": _f(prob_label), "correct": bool(correct), "entropy": _f(entropy),
                  "topk_labels": [_name(names, i) for i, _ in top] if top else None,
                  "topk_probs": [float(p) for _, p in top] if top else None,
                  "index_id": self.head.index_id, "embedding_row": None if row is None else int(row)}
        self._facts_of(values, path, sha)
        for k in schema.NAMES:
            cols[k].append(values.get(k))

    def _facts_of(self, values: dict[str, Any], path: str, sha: str | None) -> None:
        f = self.facts
        comp = f.competency.get(path)
        if comp is not None:
            from ..analyses.competency.results import low_part

            c, conf, pid = comp
            values.update(competency=c, competency_confidence=conf, competency_id_probability=pid,
                          competency_low_part=low_part({"competency": c, "confidence": conf, "id_probability": pid},
                                                       f.competency_threshold),
                          competency_threshold=f.competency_threshold, competency_key=f.competency_key)
        modes = f.modes.get(path)
        if modes:
            values.update(failure_mode_ids=[m[0] for m in modes], failure_mode_sentences=[m[1] for m in modes],
                          failure_mode_holds=[m[2] for m in modes])
        if f.modes_key is not None and sha is not None:  # the run analysed the indexed images only
            values["failure_modes_key"] = f.modes_key
        if sha and sha in f.explanations:
            values.update(f.explanations[sha])
        if f.fix:
            hit = f.fix.get(_pixel_hash(path))
            if hit is not None:
                where, before, after = hit
                label = values["true_index"]
                values.update(fix_key=f.fix_key, fix_set=where, fix_pred_before=_name(self.head.class_names, before),
                              fix_pred_after=_name(self.head.class_names, after),
                              fix_gained=before != label and after == label,
                              fix_lost=before == label and after != label)

    def _unindexed(self, batch_rows: int, ctx: JobContext) -> Iterator[dict[str, list]]:
        from ..data.sources import open_source

        try:
            dataset = open_source(self.head.dataset_root or "")
            dataset = dataset.with_class_names(self.head.class_names, skip_unmatched=True)
        except NemoError as exc:
            self.notes.append(f"The dataset could not be read to list images not indexed yet ({exc.message}); the "
                              "table holds the indexed images only.")
            return
        with self.store.transaction() as conn:
            indexed = {p for (p,) in conn.execute("SELECT path FROM index_entries WHERE index_id=?",
                                                  (self.head.index_id,))}
        cols, n = _empty_columns(), 0
        for item in dataset.items:
            p = str(item.path)
            if p in indexed:
                continue
            n += 1
            values = {"path": p, "true_index": int(item.label), "true_label": _name(self.head.class_names,
                                                                                    item.label)}
            self._facts_of(values, p, None)
            for k in schema.NAMES:
                cols[k].append(values.get(k))
            if len(cols["path"]) >= batch_rows:
                ctx.check_cancelled()
                yield cols
                cols = _empty_columns()
        if cols["path"]:
            yield cols
        if n:
            self.notes.append(f"{n} image(s) of the dataset are not in the reference index yet: their rows have the "
                              "path and true label only (run `nemo index` to add them).")

    # -- outputs ----------------------------------------------------------------------------------------------
    def write(self, target: str | Path, *, fmt: str | None = None, batch_rows: int = BATCH_ROWS,
              ctx: JobContext | None = None) -> dict[str, Any]:
        """Write the table to `target` (.parquet, .csv or .jsonl, or `fmt`); returns {"rows", "path", "format"}."""
        from .writers import write_table

        return write_table(self, Path(target), fmt=fmt, batch_rows=batch_rows, ctx=ctx)

    def to_arrow(self):
        """A pyarrow Table (holds every row: for a dataset that fits in memory)."""
        import pyarrow as pa

        sch = schema.arrow_schema(self.metadata())
        batches = [pa.RecordBatch.from_pydict(c, schema=sch) for c in self.batches()]
        return pa.Table.from_batches(batches, schema=sch.with_metadata(self.metadata()))

    def to_pandas(self):
        """A pandas DataFrame with nullable dtypes (string, Int64, Float64, boolean; lists as Python lists)."""
        import pandas as pd

        from ..base.extras import available

        if available("parquet"):
            return self.to_arrow().to_pandas(types_mapper=_pandas_types)
        cols = _empty_columns()
        for c in self.batches():
            for k, v in c.items():
                cols[k].extend(v)
        df = pd.DataFrame(cols)
        for c in schema.COLUMNS:
            if c.type in schema.PANDAS_DTYPES:
                df[c.name] = df[c.name].astype(schema.PANDAS_DTYPES[c.type])
        return df


class _IndexFacts:
    """The three facts gather() reads from an index."""

    def __init__(self, head: IndexHead) -> None:
        self.index_id, self.classifier_id, self.classifier_revision = (head.index_id, head.classifier_id,
                                                                       head.classifier_revision)


def _pandas_types(arrow_type):
    import pandas as pd
    import pyarrow as pa

    return {pa.string(): pd.StringDtype(), pa.int64(): pd.Int64Dtype(), pa.float64(): pd.Float64Dtype(),
            pa.bool_(): pd.BooleanDtype()}.get(arrow_type)


def _empty_columns() -> dict[str, list]:
    return {k: [] for k in schema.NAMES}


def _name(names: list[str], i) -> str | None:
    return names[int(i)] if i is not None and 0 <= int(i) < len(names) else None


def _f(v) -> float | None:
    if v is None:
        return None
    v = float(v)
    return None if v != v else v  # NaN (an unknown entropy) is a missing fact


def _pixel_hash(path: str) -> str | None:
    """The fix records its held-out images by pixels (they are loaded from a fix folder, not named by path)."""
    from ..base.images import load_image
    from ..store.keys import content_hash

    try:
        return content_hash(load_image(path).convert("RGB"))
    except (NemoError, OSError):
        return None


def _consolidate_if_pending(store, index_id: str) -> None:
    """An interrupted build leaves rows without a matrix row: publish them first (as loading the index does)."""
    from ..data.index_files import consolidate

    with store.transaction() as conn:
        pending = conn.execute("SELECT count(*) FROM index_entries WHERE index_id=? AND row IS NULL",
                               (index_id,)).fetchone()[0]
    if pending:
        consolidate(store, index_id, remove_orphans=False)


def _index_rows(store, index_id: str, batch_rows: int) -> Iterator[list[tuple]]:
    """The index's rows in path order, `batch_rows` at a time (keyset paging on the primary key: each batch is one
    short read, so no read lock is held while the caller writes)."""
    last = ""
    while True:
        with store.transaction() as conn:
            rows = conn.execute(
                "SELECT path, sha256, label, pred, prob_label, prob_pred, correct, row, entropy, top5 "
                "FROM index_entries WHERE index_id=? AND path > ? ORDER BY path LIMIT ?",
                (index_id, last, batch_rows)).fetchall()
        if not rows:
            return
        yield rows
        last = rows[-1][0]
