"""`nemo index DATASET --classifier ID`: build or update the reference index SciTX retrieves from.

Ctrl-C stops cleanly after the batch in progress: every finished batch stays indexed and the same command
resumes. A second Ctrl-C stops at once (committed batches are still kept).
"""
from __future__ import annotations

import json
import sys

INDEXING = "Indexing images"  # build_index's main stage


def _open_store():
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths

    return ResultsStore.open(get_paths().ensure())


def run_list(args) -> int:
    from ...core.data.reference_index import ReferenceIndex

    store = _open_store()
    try:
        rows = ReferenceIndex.list(store)
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("no reference index yet; build one with `nemo index DATASET --classifier ID`")
    for r in [] if args.json else rows:
        acc = f"{100 * r['correct'] / r['entries']:.1f}% correct" if r["entries"] else "empty"
        print(f"{r['index_id']}  {r['entries']} images, {acc}, dim {r['feature_dim']}  "
              f"{r['classifier_id']}  {r['dataset_root']}")
    return 0


def run_delete(args) -> int:
    from ...core.data.reference_index import ReferenceIndex, delete_index
    from ...core.base.errors import ConfigError

    store = _open_store()
    try:
        if args.delete not in {r["index_id"] for r in ReferenceIndex.list(store)}:
            raise ConfigError(f"No reference index with id '{args.delete}'.",  # a usage error: exit 2
                             hint="`nemo index --list` shows the ids.")
        delete_index(store, args.delete)
    finally:
        store.close()
    print(json.dumps({"deleted": args.delete}) if args.json else f"deleted reference index {args.delete}")
    return 0


def run_index(args) -> int:
    from ...core.data.datasets import open_dataset
    from ...core.data.input_pipeline import DEFAULT_DRAFT_FACTOR, LoaderSettings
    from ...core.data.reference_index import align_to_classifier, build_index
    from ...core.base.errors import ConfigError, JobCancelled
    from ...core.models.catalog import resolve_model_ref
    from ...core.models.families import LoadOptions, load_model
    from ..progress import StageBars, cancellable_job

    if args.list:
        return run_list(args)
    if args.delete:
        return run_delete(args)
    if not args.dataset or not args.classifier:
        raise ConfigError("Give a dataset and a classifier.",
                          hint="nemo index DATASET --classifier ID   (or `nemo index --list`)")
    if args.batch_size < 1:
        raise ConfigError("--batch-size must be at least 1.", hint="For example --batch-size 32.")
    loading = LoaderSettings(workers=args.workers, draft_factor=0 if args.no_draft else DEFAULT_DRAFT_FACTOR,
                             decode=args.decode)
    dataset = open_dataset(args.dataset)  # dataset problems surface before a model is loaded
    spec = resolve_model_ref(args.classifier, "classifier")

    # The images bar stays on screen; none at all when stderr is not a terminal (logs, pipes).
    bars = StageBars(kept={INDEXING}, units={INDEXING: "img"}, terminal_only=True)
    store = _open_store()
    try:
        # Loading the model is inside the job too: a Ctrl-C while it loads is a cancel like any other.
        with cancellable_job(bars, cancels_after="the current batch") as ctx:
            classifier = load_model(spec, LoadOptions(device=args.device))
            ctx.check_cancelled()
            dataset = align_to_classifier(dataset, classifier, skip_unmatched=True if args.skip_unmatched else None)
            for label, why in sorted(dataset.skipped_labels.items()):
                print(f"skipped class '{label}': {why}", file=sys.stderr)
            index = build_index(dataset, classifier, store, ctx, batch_size=args.batch_size,
                                feature_dtype="float16" if args.float16 else "float32",
                                loading=loading)
    except JobCancelled as exc:
        from ..output import cancelled

        # Under --json the error carries what was indexed so far (kept for the re-run), when there is any.
        report = json.loads(exc.detail) if exc.detail else None
        return cancelled(args, exc.message, **({"report": report} if report is not None else {}))
    finally:
        store.close()

    report = index.last_build
    if args.json:
        print(json.dumps({"index_id": index.index_id, "dataset": str(dataset.root), "classifier": index.classifier_id,
                          "classifier_revision": index.classifier_revision, "entries": len(index),
                          "accuracy": index.accuracy, "feature_dim": index.feature_dim,
                          "warning": index.prediction_warning(), "report": report.to_dict()}, indent=2))
        return exit_code(index)
    rate = report.processed / report.seconds if report.seconds and report.processed else None
    acc = f"{100 * index.accuracy:.1f}% classified correctly" if index.accuracy is not None else "no images"
    print(f"Reference index {index.index_id}: {len(index)} images of {dataset.root}, {acc}.")
    print(f"  this run: {report.processed} processed, {report.unchanged} unchanged, {report.removed} removed, "
          f"{len(report.errors)} unreadable; {report.seconds:.1f} s" + (f" ({rate:.0f} images/s)" if rate else ""))
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    for path, reason in list(report.errors.items())[:10]:
        print(f"  unreadable: {reason}" if path in reason else f"  unreadable: {path}: {reason}")
    if len(report.errors) > 10:
        print(f"  ... and {len(report.errors) - 10} more unreadable files (see --json)")
    warning = index.prediction_warning()
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return exit_code(index)


def exit_code(index) -> int:
    """Unreadable images make an index partial (exit 1); an index of none of its images is a failure (3)."""
    from ..exit_codes import for_counts

    return for_counts(len(index), len(index.last_build.errors))


def register(sub) -> None:
    p = sub.add_parser("index", help="index a reference dataset with a classifier (for SciTX retrieval)",
                       description="Run every image of DATASET (a folder with one sub-folder per class, or a "
                                   "CSV manifest with a path,label header) through the classifier and keep "
                                   "predictions and embeddings in the results store. Only new or changed images "
                                   "are processed; Ctrl-C stops cleanly and a re-run resumes.")
    p.add_argument("dataset", nargs="?", metavar="DATASET", help="class-folder dataset or CSV manifest")
    p.add_argument("--classifier", metavar="ID", help="catalog id or <family>:<source>")
    p.add_argument("--batch-size", type=int, default=32, metavar="N", help="images per classifier call (32)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, mps (default auto)")
    p.add_argument("--skip-unmatched", action="store_true",
                   help="leave out classes the classifier does not know instead of stopping")
    p.add_argument("--float16", action="store_true", help="store embeddings as float16 (half the disk)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="threads decoding images ahead of the model (default: the CPU count, at most 8)")
    p.add_argument("--no-draft", action="store_true",
                   help="decode every JPEG at full size (default: JPEGs over twice the model's input side decode "
                        "at a reduced scale, much faster, nearly the same pixels after the model's resize)")
    p.add_argument("--decode", choices=("cpu", "gpu"), default="cpu",
                   help="where JPEGs are decoded and resized: cpu (default) or gpu (nvJPEG on the classifier's CUDA "
                        "device; without one the CPU pipeline runs, with a note)")
    p.add_argument("--list", action="store_true", help="list the reference indexes in the store")
    p.add_argument("--delete", metavar="INDEX_ID", help="delete a reference index (its rows and arrays)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run_index)
