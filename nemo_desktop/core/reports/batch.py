"""The combined report of a batch diagnosis (several images explained in one go from the desktop app).

It is a run report without a stored run: the rows (core/base/batch_items.py) say what happened to every image, including
the ones skipped by design and the failures, and each explained image gets the same section a run report
gives it (runs.build_sample_sections). Summary: n per status, the run summary table of the results, the CEI
histogram, then a table of every image, the failures with their hints, the manifest and the sample sections.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..base.batch_items import FAILED, NOT_TESTED, BatchItem, count_statuses, describe_counts
from ..base.errors import ConfigError
from ..base.job_context import JobContext, null_context
from .document import DASH, THUMB_PX, Block, Cell, Paragraph, ReportDocument, Section, Table
from .format import _now, clip, fmt_cei
from .images import ImageCache
from .runs import MANIFEST_TITLE, _run_manifest, _summary, build_sample_sections, cei_histogram
from .sections.sample import CEI_IN_WORDS, _doc_meta, _load_stored, _Loaded

EXPLANATION_CHARS = 160  # the images table shows the start of each explanation; the sample section has it all


def _load_results(items: list[BatchItem], store, ctx: JobContext) -> tuple[dict[int, _Loaded], dict[int, str]]:
    """The stored results of the explained rows (by row); rows whose result cannot be read get a problem note."""
    loaded, problems = {}, {}
    for i, it in enumerate(items):
        ctx.check_cancelled()
        ctx.progress("Reading results", i, len(items))
        if not it.result_key:
            continue
        stored = store.get(it.result_key)
        if stored is None:
            problems[i] = "the result is no longer in the results store"
            continue
        try:
            loaded[i] = _load_stored(stored)
        except ConfigError as exc:
            problems[i] = exc.message
    return loaded, problems


def _images_table(items: list[BatchItem], cache: ImageCache, loaded: dict[int, _Loaded],
                  problems: dict[int, str]) -> Table:
    rows: list[list[Cell]] = []
    for i, it in enumerate(items):
        # An explained image shows the copy its result stored (the file may have moved since); others the file.
        thumb = loaded[i].image(cache, loaded[i].result.sample.image_artifact, THUMB_PX) if i in loaded else None
        if thumb is None and it.image_path:
            thumb = cache.load(Path(it.image_path), THUMB_PX)
        text = it.summary_text()
        if len(text) > EXPLANATION_CHARS:
            text = text[:EXPLANATION_CHARS - 1] + "\u2026"
        if i in problems:
            text += f"\n({problems[i]})"
        rows.append([str(i + 1), thumb.with_text(clip(it.name, 40), f"Image {clip(it.name)}") if thumb else DASH,
                     clip(it.name, 60), it.truth_text(), fmt_cei(it.cei) if it.cei is not None else DASH, text,
                     it.status])
    return Table(["#", "Image", "File", "True \u2192 predicted", "Best CEI", "Explanation", "Status"], rows,
                 align=["r", "c", "l", "l", "r", "l", "l"], widths=[0.6, 2.0, 2.4, 2.4, 1.3, 5.5, 2.2],
                 caption=f"n = {len(items)} images. \"No cause found\": hypotheses were tested and none raised "
                         "P(true) (a best CEI that is not positive, or no edit that tested one); \"nothing could be "
                         "tested\": no hypothesis got a CEI, for the reason given. Correctly classified images are "
                         "skipped by design, not failures.")


def build_batch_report(items: list[BatchItem], store, *, title: str | None = None, image_format: str = "jpeg",
                       ctx: JobContext | None = None) -> ReportDocument:
    """One report of a batch: a summary with n per status, a table of every image, and each explained image's
    section. Images default to JPEG, as in run reports, so that a large batch stays attachable."""
    ctx = ctx or null_context()
    if not items:
        raise ConfigError("The batch has no images to report.", hint="Run a diagnosis on several images first.")
    cache = ImageCache(image_format)
    by_row, problems = _load_results(items, store, ctx)
    loaded = list(by_row.values())

    status_rows = [[status, str(n)] for status, n in count_statuses(items)] + [["Total", str(len(items))]]
    summary_blocks: list[Block] = [
        Table(["Status", "Images"], status_rows, align=["l", "r"], widths=[4, 1.5],
              caption="Each image once. Explained: a hypothesis raised P(true). No cause found: hypotheses were "
                      "tested and none did. Nothing could be tested: no hypothesis got a CEI (the reasons are "
                      "listed below). Skipped images were correctly classified (nothing to explain) or had no true "
                      "class; failed ones are listed below with their error."),
    ]
    if loaded:
        summary, _methods = _summary(loaded, {})
        summary_blocks += [summary, Paragraph(CEI_IN_WORDS, "muted")]
    sections = [Section("Summary", "summary", summary_blocks)]
    ceis = {}
    for ld in loaded:
        if ld.result.cei is not None and math.isfinite(ld.result.cei):
            ceis.setdefault(ld.method, []).append(ld.result.cei)
    hist = cei_histogram(ceis) if ceis else None
    if hist:
        sections.append(Section("CEI distribution", "cei-chart", [hist]))
    ctx.progress("Preparing images", 0, None)
    sections.append(Section("Images", "images", [_images_table(items, cache, by_row, problems)]))
    failed = [it for it in items if it.status == FAILED]
    if failed:
        sections.append(Section("Failures", "failures", [
            Table(["Image", "Error", "What to do"], [[clip(it.name, 60), it.error or DASH, it.hint or DASH]
                                                     for it in failed], widths=[2.5, 5, 4],
                  caption=f"n = {len(failed)} failed images.")]))
    untested = [it for it in items if it.status == NOT_TESTED]
    if untested:
        sections.append(Section("Nothing could be tested", "not-tested", [
            Table(["Image", "Why nothing could be tested"], [[clip(it.name, 60), it.no_cause or DASH]
                                                               for it in untested], widths=[2.5, 9],
                  caption=f"n = {len(untested)} images: the method ran, but no hypothesis could be tested, so "
                          "these say nothing about the cause.")]))
    _index_rows, sample_sections, methods = build_sample_sections(loaded, cache, ctx)
    sections += sample_sections
    manifest = _run_manifest(loaded)
    if manifest:  # an appendix: what a reader needs to reproduce the results, after the results
        sections.append(Section(MANIFEST_TITLE, "manifest", manifest))
    return ReportDocument(
        kind="run", title=title or f"Batch diagnosis of {len(items)} images",
        subtitle=describe_counts(items) + (f"; method {', '.join(methods)}" if methods else ""),
        generated_at=_now(), sections=sections, meta=_doc_meta())


def export_batch_report(items: list[BatchItem], store, fmt: str, out_path, *, title: str | None = None,
                        ctx: JobContext | None = None) -> Path:
    """Build, render (HTML or PDF, by `fmt`) and write the batch report atomically; returns the path."""
    from . import write_report

    return write_report(lambda: build_batch_report(items, store, title=title, ctx=ctx), fmt, out_path, ctx=ctx)


def batch_json(items: list[BatchItem]) -> dict:
    """The batch as JSON: n per status and one row per image with its outcome and reason
    (core/base/batch_items.to_json)."""
    from ..base.batch_items import to_json

    return {"images": len(items), "counts": dict(count_statuses(items)), "summary": describe_counts(items),
            "rows": [to_json(it) for it in items]}


def export_batch_json(items: list[BatchItem], out_path) -> Path:
    import json

    from ..store import atomic_write_text

    if not items:
        raise ConfigError("The batch has no images to report.", hint="Run a diagnosis on several images first.")
    path = Path(out_path)
    atomic_write_text(path, json.dumps(batch_json(items), indent=2, ensure_ascii=False))
    return path
