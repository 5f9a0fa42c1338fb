"""`nemo report RESULT_OR_RUN_ID --format html|pdf -o FILE`: export a diagnosis or a whole run."""
from __future__ import annotations

import json
from pathlib import Path


def _format_for(args) -> str:
    if args.format:
        return args.format
    suffix = Path(args.output).suffix.lower().lstrip(".") if args.output else ""
    return suffix if suffix in ("html", "pdf") else "html"


def _result_kind(store, key: str) -> str:
    """What the stored result is, in words: 'diagnosis' for a per-image explanation, else its analysis name
    (e.g. 'failure-modes', 'model-diff')."""
    stored = store.get(key)
    kind = stored.kind if stored is not None else "result"
    return "diagnosis" if kind == "explanation" else kind


def run_report(args) -> int:
    from ...core.base.errors import ConfigError, JobCancelled
    from ...core.reports import export_report, resolve_target
    from ..output import cancelled
    from ..progress import StageBars, cancellable_job
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths

    fmt = _format_for(args)
    if args.format and args.output and Path(args.output).suffix.lower() not in ("", f".{fmt}"):
        raise ConfigError(f"--format {fmt} does not match the file name {args.output}.",
                          hint=f"Name the file *.{fmt}, or drop --format to go by the extension.")
    if fmt == "pdf":
        from ...core.base.extras import require

        require("pdf", "PDF export")  # before the store is opened; HTML needs nothing extra
    store = ResultsStore.open(get_paths().ensure())
    try:
        kind, ident = resolve_target(store, args.target)
        what = "run" if kind == "run" else _result_kind(store, ident)
        out = Path(args.output) if args.output else Path(f"nemo-{kind}-{ident[:12]}.{fmt}")
        # A run's report reads every result and encodes its images: seconds to minutes, so it shows a bar.
        with cancellable_job(StageBars(terminal_only=True)) as ctx:
            written = export_report(ident, store, fmt, out, image_format=args.images, ctx=ctx)
    except JobCancelled as exc:
        return cancelled(args, f"{exc.message} No report was written.")
    finally:
        store.close()
    size = written.stat().st_size
    if args.json:
        print(json.dumps({"kind": kind, "id": ident, "format": fmt, "path": str(written), "bytes": size}, indent=2))
    else:
        print(f"wrote {what} report {written} ({size / 1024:.0f} KiB)")
    return 0


def register(subparsers) -> None:
    from ..output import OutputPath

    p = subparsers.add_parser(
        "report", help="export a diagnosis or a run as a self-contained HTML or PDF report",
        description="Export a stored diagnosis (by result key or a unique key prefix) or a whole run (by run "
                    "id) as one self-contained HTML file or a paginated PDF.")
    p.add_argument("target", metavar="RESULT_OR_RUN_ID", help="a result key, a unique key prefix, or a run id")
    p.add_argument("--format", choices=("html", "pdf"), help="report format (default: from -o's extension, "
                                                               "else html)")
    p.add_argument("-o", "--output", metavar="FILE", type=OutputPath(),
                   help="file to write (default: nemo-<kind>-<id>.<format> "
                                                           "in the current folder)")
    p.add_argument("--images", choices=("png", "jpeg"),
                   help="image encoding (default: png for a diagnosis; jpeg for a run, about 6x smaller)")
    p.add_argument("--json", action="store_true", help="print what was written (path, size, kind) as JSON")
    p.set_defaults(func=run_report)
