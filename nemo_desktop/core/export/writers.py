"""Writing the per-image table batch by batch: Parquet through pyarrow's ParquetWriter (one row group per batch),
CSV and JSON Lines with the standard library. Nothing but the current batch is held.

CSV has no list type: list columns are JSON arrays in their cell, nulls are empty cells. JSON Lines keeps lists and
nulls as JSON. Parquet carries the schema with each column's description (field metadata `doc`) and the table's
facts (schema metadata: index, classifier, class names, which stored results were used).

The file is written beside its target and renamed into place when complete: an interrupted export leaves no
half-written table under the requested name.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError
from ..base.job_context import JobContext
from . import schema

FORMATS = ("parquet", "csv", "jsonl")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def format_for(target: Path, fmt: str | None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise ConfigError(f"Unknown table format '{fmt}'.", hint=f"Use one of: {', '.join(FORMATS)}.")
        return fmt
    found = _SUFFIXES.get(target.suffix.lower())
    if found is None:
        raise ConfigError(f"Cannot tell the table format from the file name {target.name}.",
                          hint="Name the file .parquet, .csv or .jsonl (or give --format).")
    return found


def write_table(table: Any, target: Path, *, fmt: str | None, batch_rows: int, ctx: JobContext | None) -> dict:
    fmt = format_for(target, fmt)
    if fmt == "parquet":
        from ..base.extras import require

        require("parquet", "Writing a Parquet table")
    if not target.parent.is_dir():
        raise ConfigError(f"The folder {target.parent} does not exist.", hint="Create it or choose another file.")
    tmp = target.with_name(f".{target.name}.partial")
    try:
        rows = {"parquet": _parquet, "csv": _csv, "jsonl": _jsonl}[fmt](table, tmp, batch_rows, ctx)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return {"path": str(target), "format": fmt, "rows": rows, "columns": len(schema.NAMES),
            "metadata": table.metadata(), "notes": list(table.notes)}


def _parquet(table: Any, path: Path, batch_rows: int, ctx) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # The notes are known only after the rows are read (e.g. images not indexed yet): the footer is written last,
    # so the schema's metadata is completed before closing.
    sch = schema.arrow_schema(table.metadata())
    n = 0
    writer = pq.ParquetWriter(str(path), sch)
    try:
        for cols in table.batches(batch_rows, ctx):
            writer.write_batch(pa.RecordBatch.from_pydict(cols, schema=sch))
            n += len(cols["path"])
        writer.add_key_value_metadata({"notes": json.dumps(table.notes)})
    finally:
        writer.close()
    return n


def _rows(cols: dict[str, list]):
    names = list(cols)
    return (dict(zip(names, values)) for values in zip(*cols.values()))


def _csv(table: Any, path: Path, batch_rows: int, ctx) -> int:
    lists = {c.name for c in schema.COLUMNS if c.type.startswith("list<")}
    n = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(schema.NAMES)
        for cols in table.batches(batch_rows, ctx):
            for row in _rows(cols):
                w.writerow(["" if v is None else json.dumps(v, ensure_ascii=False) if k in lists else v
                            for k, v in row.items()])
                n += 1
    return n


def _jsonl(table: Any, path: Path, batch_rows: int, ctx) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for cols in table.batches(batch_rows, ctx):
            for row in _rows(cols):
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    return n
