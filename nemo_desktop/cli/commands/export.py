"""`nemo export table|fiftyone`: NEMO's per-image findings where users already look.

    nemo export table DATASET -c CLASSIFIER -o findings.parquet     # or .csv / .jsonl
    nemo export fiftyone DATASET -c CLASSIFIER --name NAME [--launch]

DATASET is a dataset folder, CSV manifest or fiftyone:NAME source that has a reference index (`nemo index`), or the
index id itself. No model is loaded: every fact comes from the results store (core/export/).
"""
from __future__ import annotations

import json
import sys


def _run_on_store(args, work):
    """Open the results store, run `work(store, ctx)` as a cancellable job with terminal progress, close the store.
    Returns (result, None), or (None, exit code) when the user cancelled."""
    from ...core.base.errors import JobCancelled
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths
    from ..progress import StageBars, cancellable_job

    store = ResultsStore.open(get_paths().ensure())
    try:
        with cancellable_job(StageBars(terminal_only=True), cancels_after="the current batch") as ctx:
            return work(store, ctx), None
    except JobCancelled as exc:
        from ..output import cancelled

        return None, cancelled(args, exc.message)
    finally:
        store.close()


def _add_common(p) -> None:
    p.add_argument("dataset", metavar="DATASET",
                   help="dataset folder, CSV manifest, fiftyone:NAME[#FIELD], or a reference index id")
    p.add_argument("-c", "--classifier", metavar="ID",
                   help="the classifier the dataset was indexed with (needed when several were)")
    p.add_argument("--competency", metavar="KEY", help="competency-score result to use (default: the newest of "
                                                         "this classifier)")
    p.add_argument("--failure-modes", metavar="KEY", help="failure-modes result to use (default: the newest on this "
                                                            "dataset and classifier)")
    p.add_argument("--fix", metavar="KEY", help="fix result to use (default: the newest of this classifier)")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")


def run_table(args) -> int:
    from pathlib import Path

    from ...core.export.writers import format_for

    target = Path(args.output)
    fmt = format_for(target, args.format)
    if fmt == "parquet":
        from ...core.base.extras import require

        require("parquet", "Writing a Parquet table")  # before the store is opened
    from ...core.export.table import PerImageTable

    def work(store, ctx):
        table = PerImageTable.open(store, args.dataset, args.classifier, competency_key=args.competency,
                                   failure_modes_key=args.failure_modes, fix_key=args.fix)
        return table.write(target, fmt=fmt, ctx=ctx)

    done, code = _run_on_store(args, work)
    if code is not None:
        return code
    if args.json:
        print(json.dumps(done, indent=2))
    else:
        print(f"Wrote {done['rows']:,} rows x {done['columns']} columns to {done['path']} ({done['format']}).")
        for note in done["notes"]:
            print(f"note: {note}", file=sys.stderr)
    return 0


def run_fiftyone(args) -> int:
    from ...core.base.extras import require

    require("fiftyone", "`nemo export fiftyone`")  # before the store is opened or FiftyOne started
    from ...core.export.fiftyone_export import export_to_fiftyone, launch

    done, code = _run_on_store(args, lambda store, ctx: export_to_fiftyone(
        store, args.dataset, args.classifier, name=args.name, competency_key=args.competency,
        failure_modes_key=args.failure_modes, fix_key=args.fix, visualization=args.visualization, ctx=ctx))
    if code is not None:
        return code
    if args.json:
        print(json.dumps(done, indent=2))
    else:
        what = "Created" if done["created"] else "Updated"
        print(f"{what} the FiftyOne dataset '{done['dataset']}': {done['samples']:,} samples ({done['added']:,} added, "
              f"{done['updated']:,} updated), {done['failure_modes']} failure mode(s) as tags and saved views.")
        vis = done["visualization"]
        print(f"Embeddings: brain key '{vis['brain_key']}' ({vis['method']}, {vis['points']:,} points)."
              if vis["computed"] else f"Embeddings not visualised: {vis['why']}.")
        for note in done["notes"]:
            print(f"note: {note}", file=sys.stderr)
    if args.launch:
        print("Opening the FiftyOne app; close it (or press Ctrl-C) to return.", file=sys.stderr)
        import contextlib

        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C closes the app: the export is complete, not cancelled
            launch(args.name, wait=True)
    return 0


def register(sub) -> None:
    from ..output import OutputPath

    p = sub.add_parser("export", help="hand NEMO's per-image findings to dataframes and FiftyOne",
                       description="Export every fact the results store holds per image of a dataset for a "
                                   "classifier (prediction, top-k, competency, failure modes, explanation, CEI, fix "
                                   "gains and losses): as a table, or as a FiftyOne dataset.")
    es = p.add_subparsers(dest="export_command", metavar="TARGET", required=True)
    t = es.add_parser("table", help="one row per image, as Parquet, CSV or JSON Lines",
                      description="Write the per-image table (columns: docs/per-image-table.md). Rows are written in "
                                  "batches: a dataset of any size is exported without holding its rows.")
    _add_common(t)
    t.add_argument("-o", "--output", metavar="FILE", required=True, type=OutputPath(),
                   help="the table file: .parquet (needs the 'parquet' extra), .csv or .jsonl")
    t.add_argument("--format", choices=("parquet", "csv", "jsonl"), help="format (default: from the file name)")
    t.set_defaults(func=run_table)
    f = es.add_parser("fiftyone", help="create or update a FiftyOne dataset with NEMO's findings",
                      description="Create (or update in place, matching samples by file path) a persistent FiftyOne "
                                  "dataset: ground truth and predictions as labels, every table column as a nemo_* "
                                  "field, failure modes as tags and saved views, the index's embeddings as a brain "
                                  "visualization. Needs the 'fiftyone' extra.")
    _add_common(f)
    f.add_argument("--name", required=True, metavar="NAME", help="the FiftyOne dataset's name")
    f.add_argument("--visualization", choices=("umap", "tsne", "pca"),
                   help="how the embeddings are laid out (default: umap when umap-learn is installed, else pca)")
    f.add_argument("--launch", action="store_true", help="open the FiftyOne app on the dataset afterwards")
    f.set_defaults(func=run_fiftyone)
