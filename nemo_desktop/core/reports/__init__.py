"""Reports: one data model (model.py) rendered as self-contained HTML (html.py) or paginated PDF (pdf.py).

The CLI (`nemo report`) and the GUI's report pane both go through `export_report`, or through the
builders and renderers when they want to preview. Nothing here imports Qt; PDF rendering uses fpdf2
(see pdf.py for why).
"""
from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any

from ..base.errors import ConfigError
from ..base.job_context import JobContext
from .html import render_html
from .images import FORMATS as IMAGE_FORMATS
from .model import ReportDocument, build_result_report, build_run_report, build_single_report
from .sections import has_own_report

FORMATS = ("html", "pdf")


def render_pdf(doc: ReportDocument, *, ctx: JobContext | None = None) -> bytes:
    from .pdf import render_pdf as _render  # fpdf2 is imported only when a PDF is asked for

    return _render(doc, ctx=ctx)


def resolve_target(store, ident: str) -> tuple[str, str]:
    """("run", run_id) or ("result", key) for a run id, a result key, or a unique prefix of either."""
    ident = ident.strip()
    if not ident:
        raise ConfigError("No result key or run id was given.", hint="Pass a result key, a key prefix or a run id.")
    if store.get_run(ident) is not None:
        return "run", ident
    if store.get(ident) is not None:
        return "result", ident
    # Prefix search: the store has no key index by prefix, so this scans (only reached when nothing matched
    # exactly).
    runs = [r["run_id"] for r in store.list_runs() if r["run_id"].startswith(ident)]
    keys = [r.key for r in store.find() if r.key.startswith(ident)] if len(ident) >= 4 else []
    matches = [("run", r) for r in runs] + [("result", k) for k in keys]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        hint = "Use at least 4 characters of a key." if len(ident) < 4 else \
            "List runs and results with `nemo cache info`."
        raise ConfigError(f"No run or stored result matches {ident!r}.", hint=hint)
    shown = ", ".join(f"{kind} {name[:16]}" for kind, name in matches[:6])
    raise ConfigError(f"{ident!r} is ambiguous: it matches {len(matches)} entries ({shown}"
                      f"{', ...' if len(matches) > 6 else ''}).", hint="Give more characters of the key or run id.")


def build_report(target: Any, store, *, image_format: str | None = None,
                 ctx: JobContext | None = None) -> ReportDocument:
    """A report of a run id, a result key (or unique prefix), an ExplanationResult or a StoredResult.
    `image_format` "png" | "jpeg"; None: PNG for a diagnosis, JPEG for a run (see images.py)."""
    if image_format is not None and image_format not in IMAGE_FORMATS:
        raise ConfigError(f"Unknown image format {image_format!r}.", hint="Choose png or jpeg.")
    fmt = {"image_format": image_format} if image_format else {}
    if isinstance(target, str):
        kind, ident = resolve_target(store, target)
        if kind == "run":
            return build_run_report(ident, store, ctx=ctx, **fmt)
        from .sections import stored_result_report

        stored = store.get(ident)
        doc = stored_result_report(stored, store, ctx=ctx, **fmt) if stored is not None else None
        return doc if doc is not None else build_single_report(ident, store, ctx=ctx, **fmt)
    kind, analysis = getattr(target, "kind", "sample"), getattr(target, "analysis", None)
    if isinstance(analysis, str) and (kind != "sample" or has_own_report(kind, analysis)):
        return build_result_report(target, store, ctx=ctx)  # an analysis' own section (dataset, model, fit, cf)
    return build_single_report(target, store, ctx=ctx, **fmt)


def render(doc: ReportDocument, fmt: str, *, ctx: JobContext | None = None) -> bytes:
    fmt = fmt.lower()
    if fmt == "html":
        return render_html(doc).encode("utf-8")
    if fmt == "pdf":
        return render_pdf(doc, ctx=ctx)
    raise ConfigError(f"Unknown report format {fmt!r}.", hint=f"Choose one of: {', '.join(FORMATS)}.")


def write_report(build: Callable[[], ReportDocument], fmt: str, out_path, *, ctx: JobContext | None = None) -> Path:
    """Check the target, build the document, render it as `fmt` and write it atomically (a reader never sees
    half a file). Returns the path written. Every report export (a result, a run, a batch) goes through here."""
    from ..store.atomic import atomic_write_bytes

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ConfigError(f"Unknown report format {fmt!r}.", hint=f"Choose one of: {', '.join(FORMATS)}.")
    out = Path(out_path).expanduser()
    if out.is_dir():
        raise ConfigError(f"{out} is a folder.", hint="Give the path of the report file to write, e.g. report.html.")
    if not out.parent.is_dir():
        raise ConfigError(f"The folder {out.parent} does not exist.", hint="Create it first, or choose another path.")
    data = render(build(), fmt, ctx=ctx)
    try:
        atomic_write_bytes(out, data)
    except OSError as exc:
        raise ConfigError(f"The report could not be written to {out}: {exc.strerror or exc}.",
                          hint="Check the folder's permissions and free space.", detail=repr(exc)) from exc
    return out


def export_report(result_or_run_id: Any, store, fmt: str, out_path, *, image_format: str | None = None,
                  ctx: JobContext | None = None) -> Path:
    """Build and write the report of a result or a run. Returns the path written."""
    return write_report(lambda: build_report(result_or_run_id, store, image_format=image_format, ctx=ctx), fmt,
                        out_path, ctx=ctx)


__all__ = ["FORMATS", "IMAGE_FORMATS", "ReportDocument", "build_report", "build_run_report", "build_single_report",
           "export_report", "write_report", "render", "render_html", "render_pdf", "resolve_target"]
