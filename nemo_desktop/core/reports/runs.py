"""The report of a run: summary per method on comparable samples, CEI chart, dataset-level sections, index, one
section per sample."""
from __future__ import annotations

import math
import statistics

from ..base.errors import ConfigError
from ..base.job_context import JobContext, null_context
from .document import (DASH, MAIN_IMAGE_PX, Block, Cell, Figures, Histogram, HistogramSeries, Index, IndexRow,
                       KeyValues, ReportDocument, Section, Table)
from .format import _date, _display_name, _flatten, _name_of, _now, clip, fmt_cei, fmt_num
from .images import ImageCache
from .sections import run_sections
from .sections.sample import (_diagnosis_children, _doc_meta, _evidence_images, _explanation_blocks, _load_stored,
                              _Loaded, _sample_blocks, _wanted_images)


# ------------------------------------------------------------------------------------------- runs
def cei_histogram(groups: dict[str, list[float]]) -> Histogram | None:
    """CEI values per method on shared bins of 1, 2, 5, 10, ... points (at most ~20 bins); also the app's chart."""
    values = [v for vs in groups.values() for v in vs]
    if not values:
        return None
    lo, hi = min(values), max(values)
    span = max(hi - lo, 1e-9)
    step = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 1e9) if span / s <= 20)
    start = math.floor(lo / step) * step
    n = max(1, math.ceil((hi - start) / step + 1e-9))
    if start + n * step <= hi:  # the maximum belongs to the last bin
        n += 1
    edges = [start + i * step for i in range(n + 1)]
    series = []
    for label, vs in groups.items():
        counts = [0] * n
        for v in vs:
            counts[min(n - 1, int((v - start) // step))] += 1
        series.append(HistogramSeries(clip(label, 40), counts, len(vs), statistics.fmean(vs) if vs else None))
    return Histogram("CEI distribution per method", "CEI (percentage points)", edges, series)


def _summary(loaded: list[_Loaded], config: dict) -> tuple[Table, list[str]]:
    groups: dict[tuple, list[_Loaded]] = {}
    cfg_ds, cfg_clf = _name_of(config.get("dataset")), _name_of(config.get("classifier"))
    for ld in loaded:
        key = (ld.field("dataset") or cfg_ds, ld.field("classifier") or cfg_clf, ld.method)
        groups.setdefault(key, []).append(ld)
    show_ds = any(k[0] for k in groups)
    show_clf = any(k[1] for k in groups)
    header = (["Dataset"] if show_ds else []) + (["Classifier"] if show_clf else []) + [
        "Method", "Samples", "Mean CEI", "Median CEI", "CEI > 0", "LLM Match", "Judged"]
    rows = []
    for (ds, clf, method), lds in groups.items():
        ceis = [ld.result.cei for ld in lds if ld.result.cei is not None and math.isfinite(ld.result.cei)]
        llm = [ld.llm_match for ld in lds if ld.llm_match is not None]
        rows.append(([ds or DASH] if show_ds else []) + ([clf or DASH] if show_clf else []) + [
            method, str(len(lds)),
            fmt_cei(statistics.fmean(ceis)) if ceis else DASH,
            fmt_cei(statistics.median(ceis)) if ceis else DASH,
            f"{100 * sum(c > 0 for c in ceis) / len(ceis):.0f} %" if ceis else DASH,
            fmt_num(statistics.fmean(llm)) if llm else DASH,
            f"{len(llm)} of {len(lds)}"])
    n_lead = len(header) - 7
    align = ["l"] * (n_lead + 1) + ["r"] * 6
    return Table(header, rows, align=align, widths=[2.5] * n_lead + [2.2, 1.7, 1.7, 1.7, 1.3, 1.4, 1.4],
                 caption="CEI is in percentage points: 100 \u00d7 (P(true | intervention) \u2212 P(true | original))."
                 ), [m for (_, _, m) in groups]


MANIFEST_TITLE = "Appendix: reproducibility manifest (all results)"


def _run_manifest(loaded: list[_Loaded]) -> list[Block]:
    values: dict[str, list[str]] = {}
    for ld in loaded:
        for k, v in _flatten(ld.result.manifest):
            vs = values.setdefault(k, [])
            if v not in vs:
                vs.append(v)
    rows = []
    for k, vs in values.items():
        shown = ", ".join(vs[:3]) + (f" \u2026 ({len(vs)} distinct values)" if len(vs) > 3 else "")
        rows.append((k, shown))
    blocks: list[Block] = [KeyValues(rows)] if rows else []
    stages: dict[str, list[float]] = {}
    for ld in loaded:
        for k, v in ld.result.timings.items():
            stages.setdefault(k, []).append(v)
    if stages:
        blocks.append(Table(["Stage", "Results", "Mean s", "Total s"],
                            [[k, str(len(v)), f"{statistics.fmean(v):.3f}", f"{sum(v):.2f}"]
                             for k, v in stages.items()],
                            align=["l", "r", "r", "r"], widths=[4, 1.5, 1.5, 1.5], caption="Timings"))
    return blocks


def build_run_report(run_id: str, store, *, image_format: str = "jpeg",
                     ctx: JobContext | None = None) -> ReportDocument:
    """Report of a run: summary per method, CEI chart, global explanation, index, one section per sample.
    Images default to JPEG so that a report of hundreds of samples stays attachable (see images.py)."""
    ctx = ctx or null_context()
    cache = ImageCache(image_format)
    run = store.get_run(run_id)
    if run is None:
        raise ConfigError(f"No run has the id {run_id!r}.", hint="List runs with `nemo cache info`.")
    config = run.get("config") or {}
    items = store.run_items(run_id)
    loaded: list[_Loaded] = []
    failures: list[list[Cell]] = []
    for i, it in enumerate(items):
        ctx.check_cancelled()
        ctx.progress("Reading results", i, len(items))
        err = it.get("error")
        stored = store.get(it["result_key"]) if it.get("result_key") else None
        if stored is None or err:
            msg = (err.get("message") if isinstance(err, dict) else err) or (
                "the result is missing from the store" if it.get("result_key") else "no result")
            failures.append([str(it["item_id"]), str(it.get("status") or DASH), str(msg)])
            if stored is None:
                continue
        try:
            loaded.append(_load_stored(stored))
        except ConfigError as exc:
            failures.append([str(it["item_id"]), str(it.get("status") or DASH), exc.message])

    summary, methods = _summary(loaded, config)
    overview_rows = [("Run", run_id), ("Kind", str(run.get("kind") or DASH)),
                     ("Status", str(run.get("status") or DASH)), ("Created", _date(run.get("created_at"))),
                     ("Items", f"{len(items)} ({len(loaded)} with results, {len(failures)} failed or missing)")]
    for k in ("dataset", "classifier"):
        if _name_of(config.get(k)):
            overview_rows.append((k.capitalize(), _name_of(config[k])))
    sections = [Section("Summary", "summary", [KeyValues(overview_rows), summary])]
    hist = cei_histogram({m: [ld.result.cei for ld in loaded if ld.method == m
                           and ld.result.cei is not None and math.isfinite(ld.result.cei)]
                       for m in dict.fromkeys(methods)})
    if hist:
        sections.append(Section("CEI distribution", "cei-chart", [hist]))
    for title, anchor, builder in run_sections():  # dataset-level results of the run (global explanation, ...)
        blocks = builder(run, store)
        if blocks:
            sections.append(Section(title, anchor, blocks))

    index_rows, sample_sections, method_order = build_sample_sections(loaded, cache, ctx)
    if index_rows:
        sections.append(Section("Index of samples", "index", [
            Index(["#", "Image", "True", "Predicted"] + [f"CEI {clip(m, 30)}" for m in method_order], index_rows)]))
    if failures:
        sections.append(Section("Failed or missing items", "failures", [
            Table(["Item", "Status", "Error"], failures, widths=[3, 1.5, 6])]))
    sections += sample_sections
    manifest = _run_manifest(loaded)
    if manifest:  # an appendix: what a reader needs to reproduce the results, after the results
        sections.append(Section(MANIFEST_TITLE, "manifest", manifest))
    ds_clf = ", ".join(x for x in (_name_of(config.get("dataset")), _name_of(config.get("classifier"))) if x)
    return ReportDocument(
        kind="run", title=f"Run report: {run_id}",
        subtitle=f"{len(sample_sections)} samples, {len(method_order)} method(s)"
        + (f", {ds_clf}" if ds_clf else ""),
        generated_at=_now(), sections=sections, meta=_doc_meta())


def build_sample_sections(loaded: list[_Loaded], cache: ImageCache,
                          ctx: JobContext) -> tuple[list[IndexRow], list[Section], list[str]]:
    """One section per sample (several methods on one image share it), the index rows that link to them, and
    the methods in order of appearance. Shared by run reports and batch reports (batch.py)."""
    by_sample: dict[str, list[_Loaded]] = {}
    for ld in loaded:
        s = ld.result.sample
        by_sample.setdefault(s.image_sha256 or s.image_path or ld.result.result_key or "", []).append(ld)
    method_order = list(dict.fromkeys(ld.method for ld in loaded))
    several_classifiers = len({ld.field("classifier") for ld in loaded}) > 1
    ctx.progress("Preparing images", 0, None)
    cache.prefetch((item for ld in loaded for item in _wanted_images(ld, compact=True)),
                   stop=lambda: ctx.cancelled)
    ctx.check_cancelled()
    index_rows, sample_sections = [], []
    for n, lds in enumerate(by_sample.values(), start=1):
        ctx.check_cancelled()
        ctx.progress("Building sample sections", n - 1, len(by_sample))
        s = lds[0].result.sample
        anchor = f"sample-{n}"
        ceis = {ld.method: fmt_cei(ld.result.cei) for ld in lds}
        index_rows.append(IndexRow(anchor, [str(n), clip(_display_name(s.image_path), 60), clip(s.true_name, 40),
                                            clip(s.pred_name, 40)]
                                   + [ceis.get(m, DASH) for m in method_order]))
        children = []
        for ld in lds:
            prefix = f"s{n}-{len(children) + 1}"
            blocks = _explanation_blocks(ld)
            ev, problems = _evidence_images(ld, cache, MAIN_IMAGE_PX)
            if ev:
                blocks.insert(0, Figures(ev))
            blocks += problems
            where = f" ({clip(ld.field('classifier') or DASH, 40)})" if several_classifiers else ""
            children.append(Section(f"Method: {clip(ld.method)}{where}", prefix, blocks,
                                    _diagnosis_children(ld, cache, prefix, compact=True)))
        sample_sections.append(Section(f"Sample {n}: {clip(_display_name(s.image_path))}", anchor,
                                       _sample_blocks(lds[0], cache, with_evidence=False), children,
                                       new_page=True))
    ctx.progress("Building sample sections", len(by_sample), len(by_sample))
    return index_rows, sample_sections, method_order
