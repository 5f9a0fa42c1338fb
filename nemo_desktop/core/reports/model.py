"""One report data model, built from ExplanationResults and the results store, rendered to HTML or PDF.

The model holds only plain text, numbers and PNG bytes: renderers never reach back into the store, and
every string in it is treated as untrusted (model output, user file names) by both renderers.

Where the builders read things (the contract other modules write to):

- A stored explanation is a `StoredResult` whose payload is `ExplanationResult.to_dict()` (or holds that
  dict under `payload["result"]`). Artifact names inside it (`sample.image_artifact`,
  `candidate.edited_artifact`, `observation.thumbnail_artifact`, the values of `evidence`) name artifacts
  of that same stored result.
- **LLM Match** is read from the stored payload's top-level field `llm_match`: a number in [0, 1], or a
  dict whose `score` (else `mean`) is that number (e.g. `{"score": 0.5, "judges": {...}}`, as the
  benchmark's "bench-sample" records hold it). Results without it are left out of the LLM Match mean; the
  summary shows how many were judged.
- **Method** shown: the payload's top-level `method` label when present (the benchmark's variant label,
  e.g. a validation-augmented baseline), else `ExplanationResult.method`.
- **Dataset / classifier** per result: payload `dataset` / `classifier`, else `manifest["dataset"]` /
  `manifest["classifier"]`, else the run config's `dataset` / `classifier` (a string, a dict with
  `id`/`name`, or a list). The summary groups by (dataset, classifier, method).
- **Global explanation**: run config field `global_explanation` (a string, or a dict with `text` and
  optionally `cei`, `method`), else the newest record `nemo global` stored for the run (kind
  "global-explanation", payload `run_id`, `explanation`, `method`, `count`) with its CEI score when there
  is one (kind "global-cei", payload `global_key`, `mean_global`, `mean_local`, `paired`).
- Run items (`store.run_items`) with no stored result, or with an `error`, are listed as failures.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Iterator, Union

from ..errors import ConfigError
from ..jobs import JobContext, null_context
from ..methods.result import Candidate, ClassScore, ExplanationResult, Observation
from .images import ImageCache, ReportImage

# Pixel bounds for embedded images: big enough to read, small enough that a 200-sample run stays portable.
MAIN_IMAGE_PX = 384
THUMB_PX = 160

SET_TITLES = {
    "A": "Set A: true class (correctly classified references)",
    "B": "Set B: predicted class (correctly classified references)",
    "C": "Set C: random references",
}


# ----------------------------------------------------------------------------------------------- blocks
@dataclass
class Paragraph:
    text: str
    style: str = "body"  # body | callout (the selected explanation) | muted | warning


@dataclass
class KeyValues:
    rows: list[tuple[str, str]]


Cell = Union[str, ReportImage]


@dataclass
class Table:
    header: list[str]
    rows: list[list[Cell]]
    align: list[str] | None = None  # per column "l" | "r" | "c"
    widths: list[float] | None = None  # relative column widths (PDF); HTML lets the browser decide
    caption: str = ""


@dataclass
class Figures:
    """Images shown side by side (wrapping), each with its caption."""

    images: list[ReportImage]
    caption: str = ""


@dataclass
class HistogramSeries:
    label: str
    counts: list[int]
    n: int
    mean: float | None


@dataclass
class Histogram:
    """Distribution per series over shared bins (`edges` has len(counts) + 1 entries)."""

    title: str
    x_label: str
    edges: list[float]
    series: list[HistogramSeries]


@dataclass
class IndexRow:
    anchor: str  # id of the section the row links to (built by us, never from model text)
    cells: list[str]


@dataclass
class Index:
    header: list[str]
    rows: list[IndexRow]


Block = Union[Paragraph, KeyValues, Table, Figures, Histogram, Index]


@dataclass
class Section:
    title: str
    anchor: str = ""
    blocks: list[Block] = field(default_factory=list)
    children: list["Section"] = field(default_factory=list)
    new_page: bool = False  # PDF: start on a fresh page


@dataclass
class ReportDocument:
    kind: str  # "single" | "run"
    title: str
    subtitle: str
    generated_at: str
    sections: list[Section]
    meta: list[tuple[str, str]] = field(default_factory=list)

    def iter_sections(self) -> Iterator[tuple[int, Section]]:
        def walk(secs, depth):
            for s in secs:
                yield depth, s
                yield from walk(s.children, depth + 1)
        yield from walk(self.sections, 0)

    def iter_images(self) -> Iterator[ReportImage]:
        for _, s in self.iter_sections():
            for b in s.blocks:
                if isinstance(b, Figures):
                    yield from b.images
                elif isinstance(b, Table):
                    yield from (c for row in b.rows for c in row if isinstance(c, ReportImage))

    def iter_text(self) -> Iterator[str]:
        """Every string a renderer will draw (the PDF renderer checks font coverage with it)."""
        yield self.title
        yield self.subtitle
        for k, v in self.meta:
            yield k
            yield v
        for _, s in self.iter_sections():
            yield s.title
            for b in s.blocks:
                if isinstance(b, Paragraph):
                    yield b.text
                elif isinstance(b, KeyValues):
                    for k, v in b.rows:
                        yield k
                        yield v
                elif isinstance(b, (Table, Index)):
                    yield from b.header
                    rows = b.rows if isinstance(b, Table) else [r.cells for r in b.rows]
                    for row in rows:
                        for c in row:
                            yield c.caption if isinstance(c, ReportImage) else c
                    if isinstance(b, Table):
                        yield b.caption
                elif isinstance(b, Figures):
                    yield b.caption
                    for im in b.images:
                        yield im.caption
                elif isinstance(b, Histogram):
                    yield b.title
                    yield b.x_label
                    for srs in b.series:
                        yield srs.label


# --------------------------------------------------------------------------------------------- format
DASH = "\u2014"


def fmt_prob(p: float | None) -> str:
    return DASH if p is None or not math.isfinite(p) else f"{100 * p:.1f} %"


def fmt_cei(c: float | None) -> str:
    return DASH if c is None or not math.isfinite(c) else f"{c:+.2f} pp"


def fmt_num(x: float | None, digits: int = 3) -> str:
    return DASH if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _label(name: str, index: int | None) -> str:
    return f"{name} (class {index})" if index is not None else name


def clip(s: str | None, n: int = 80) -> str:
    """Titles, captions and index cells show at most n characters; the full text is in the body."""
    s = s or ""
    return s if len(s) <= n else s[:n - 1] + "\u2026"


def _short(s: str | None, n: int = 12) -> str:
    return (s or "")[:n]


def _display_name(path: str | None) -> str:
    return PurePath(path).name if path else DASH


def _now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def _date(ts: float | None) -> str:
    if ts is None:
        return DASH
    return _dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested manifest -> ("models.mllm.revision", "abc") rows, in insertion order."""
    if isinstance(value, dict):
        if not value:
            return [(prefix, "{}")] if prefix else []
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return [(prefix, ", ".join(str(v) for v in value))]
        out = []
        for i, v in enumerate(value):
            out += _flatten(v, f"{prefix}[{i}]")
        return out
    if isinstance(value, float):
        return [(prefix, f"{value:g}")]
    return [(prefix, DASH if value is None else str(value))]


def _name_of(v: Any) -> str | None:
    """A dataset/classifier given as text, a dict with an id/name, or a list of either."""
    if v is None or v == "":
        return None
    if isinstance(v, dict):
        for k in ("id", "name", "model_id", "repo_id"):
            if v.get(k):
                return str(v[k])
        return json.dumps(v, sort_keys=True, default=str)
    if isinstance(v, (list, tuple)):
        names = [n for n in (_name_of(x) for x in v) if n]
        return ", ".join(names) or None
    return str(v)


def llm_match_of(payload: dict) -> float | None:
    """LLM Match of one stored result (see the module docstring), or None when not judged."""
    v = payload.get("llm_match")
    if isinstance(v, dict):
        v = v.get("score", v.get("mean"))
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


# ---------------------------------------------------------------------------------------- loading
@dataclass
class _Loaded:
    """An explanation with where its artifacts live and the payload fields outside ExplanationResult."""

    result: ExplanationResult
    artifacts: dict[str, Any]  # artifact name -> Path
    payload: dict
    created_at: float | None = None

    def image(self, cache: ImageCache, name: str | None, max_side: int) -> ReportImage | None:
        if not name:
            return None
        return cache.load(self.artifacts.get(name), max_side)

    @property
    def llm_match(self) -> float | None:
        return llm_match_of(self.payload)

    @property
    def method(self) -> str:
        """The benchmark's method label when the record has one (e.g. a validation-augmented variant)."""
        label = self.payload.get("method")
        return label if isinstance(label, str) and label else self.result.method

    def field(self, name: str) -> str | None:
        return _name_of(self.payload.get(name)) or _name_of(self.result.manifest.get(name))


def explanation_from_payload(payload: dict, key: str = "") -> ExplanationResult:
    d = payload.get("result") if isinstance(payload.get("result"), dict) else payload
    if not isinstance(d, dict) or "method" not in d or "sample" not in d:
        raise ConfigError(f"Result {_short(key)} is not an explanation.",
                          hint="Pass the key of an explanation result (see `nemo explain`) or a run id.")
    try:
        r = ExplanationResult.from_dict(d)
    except (TypeError, KeyError, ValueError) as exc:
        raise ConfigError(f"Result {_short(key)} could not be read as an explanation.",
                          hint="It may have been written by another version of NEMO Desktop; re-run it.",
                          detail=repr(exc)) from exc
    if not r.result_key:
        r.result_key = key or None
    return r


def _load_stored(stored) -> _Loaded:
    r = explanation_from_payload(stored.payload, stored.key)
    return _Loaded(r, dict(stored.artifacts), stored.payload, getattr(stored, "created_at", None))


def _resolve_single(result, store) -> _Loaded:
    if isinstance(result, str):
        stored = store.get(result)
        if stored is None:
            raise ConfigError(f"No stored result has the key {result!r}.",
                              hint="List results with `nemo cache info`, or pass a run id.")
        return _load_stored(stored)
    if isinstance(result, ExplanationResult):
        stored = store.get(result.result_key) if (store is not None and result.result_key) else None
        if stored is None:  # not stored (yet): the text is reported, the images are shown as missing
            return _Loaded(result, {}, {})
        loaded = _load_stored(stored)
        loaded.result = result
        return loaded
    if hasattr(result, "payload") and hasattr(result, "artifacts"):  # a StoredResult
        return _load_stored(result)
    raise TypeError(f"cannot build a report from {type(result).__name__}")


# -------------------------------------------------------------------------------------- sections
def _missing(what: str) -> Paragraph:
    return Paragraph(f"{what}: image not available (the artifact is missing or unreadable).", "warning")


def _top5_table(scores: list[ClassScore], caption: str) -> Table:
    return Table(["#", "Class", "Probability"],
                 [[str(i + 1), _label(s.name, s.index), fmt_prob(s.prob)] for i, s in enumerate(scores)],
                 align=["r", "l", "r"], widths=[0.6, 5, 1.6], caption=caption)


def _evidence_images(ld: _Loaded, cache: ImageCache, max_side: int) -> tuple[list[ReportImage], list[Block]]:
    images, problems = [], []
    for label, name in ld.result.evidence.items():
        caption = "Grad-CAM overlay" if "cam" in label.lower() else clip(label)
        im = ld.image(cache, name, max_side)
        if im is None:
            problems.append(_missing(caption))
        else:
            images.append(im.with_text(caption))
    return images, problems


def _sample_blocks(ld: _Loaded, cache: ImageCache, with_evidence: bool) -> list[Block]:
    s = ld.result.sample
    blocks: list[Block] = []
    figs: list[ReportImage] = []
    im = ld.image(cache, s.image_artifact, MAIN_IMAGE_PX)
    if im is not None:
        figs.append(im.with_text("Input image", f"Input image {clip(_display_name(s.image_path))}"))
    else:
        blocks.append(_missing("Input image"))
    problems: list[Block] = []
    if with_evidence:
        ev, problems = _evidence_images(ld, cache, MAIN_IMAGE_PX)
        figs += ev
    if figs:
        blocks.insert(0, Figures(figs))
    blocks += problems
    blocks.append(KeyValues([
        ("File", s.image_path or DASH),
        ("SHA-256", s.image_sha256 or DASH),
        ("True label", f"{_label(s.true_name, s.true_index)}, P = {fmt_prob(s.prob_true)}"),
        ("Predicted label", f"{_label(s.pred_name, s.pred_index)}, P = {fmt_prob(s.prob_pred)}"),
    ]))
    if s.top5:
        blocks.append(_top5_table(s.top5, "Classifier top-5 on the input image"))
    return blocks


def _explanation_blocks(ld: _Loaded) -> list[Block]:
    r = ld.result
    blocks: list[Block] = [Paragraph(r.explanation or "(no explanation was produced)", "callout")]
    rows = [("Method", ld.method), ("CEI of the explanation", fmt_cei(r.cei))]
    if r.selected_index is not None and r.candidates:
        rows.append(("Selected candidate", f"{r.selected_index + 1} of {len(r.candidates)}"))
    if ld.llm_match is not None:
        rows.append(("LLM Match", fmt_num(ld.llm_match, 2)))
    blocks.append(KeyValues(rows))
    blocks += [Paragraph(n, "muted") for n in r.notes]
    return blocks


def _candidate_section(ld: _Loaded, i: int, c: Candidate, cache: ImageCache, prefix: str) -> Section:
    r = ld.result
    selected = r.selected_index == i
    title = f"Candidate {i + 1}" + (" (selected)" if selected else "") + f": CEI {fmt_cei(c.cei)}"
    kind = {"image": "Image edit instruction", "prompt": "Rewritten zero-shot prompt"}.get(
        c.intervention_kind or "", "Intervention")
    rows = [("Hypothesis", c.hypothesis or DASH),
            (kind, c.intervention or DASH),
            ("P(true) before", fmt_prob(c.prob_true_before)),
            ("P(true) after", fmt_prob(c.prob_true_after)),
            ("CEI", fmt_cei(c.cei))]
    blocks: list[Block] = [KeyValues(rows)]
    if c.error:
        blocks.append(Paragraph(f"This candidate failed: {c.error}", "warning"))
    if c.edited_artifact:
        orig = ld.image(cache, r.sample.image_artifact, MAIN_IMAGE_PX)
        edited = ld.image(cache, c.edited_artifact, MAIN_IMAGE_PX)
        figs = []
        if orig is not None:
            figs.append(orig.with_text(f"Original, P(true) = {fmt_prob(c.prob_true_before)}"))
        if edited is not None:
            figs.append(edited.with_text(f"Counterfactual, P(true) = {fmt_prob(c.prob_true_after)}"))
        else:
            blocks.append(_missing("Counterfactual image"))
        if figs:
            blocks.append(Figures(figs))
    if c.top5_before or c.top5_after:
        n = max(len(c.top5_before), len(c.top5_after))
        cell = lambda xs, k: f"{xs[k].name}, {fmt_prob(xs[k].prob)}" if k < len(xs) else ""  # noqa: E731
        blocks.append(Table(["#", "Top-5 before", "Top-5 after"],
                            [[str(k + 1), cell(c.top5_before, k), cell(c.top5_after, k)] for k in range(n)],
                            align=["r", "l", "l"], widths=[0.6, 4, 4]))
    return Section(title, f"{prefix}-cand-{i + 1}", blocks)


def _observation_sections(ld: _Loaded, cache: ImageCache, prefix: str) -> list[Section]:
    by_set: dict[str, list[Observation]] = {}
    for o in ld.result.observations:
        by_set.setdefault((o.set_name or "?").upper(), []).append(o)
    out = []
    for set_name in sorted(by_set, key=lambda k: (k not in SET_TITLES, k)):
        rows: list[list[Cell]] = []
        for o in by_set[set_name]:
            thumb = ld.image(cache, o.thumbnail_artifact, THUMB_PX)
            name = _display_name(o.image_path)
            rows.append([thumb.with_text(clip(name), f"Reference image {clip(name)}") if thumb else "(no image)",
                         f"{_label(o.label_name, o.label_index)}\n{name}",
                         fmt_num(o.similarity),
                         o.caption or DASH])
        out.append(Section(SET_TITLES.get(set_name, f"Set {set_name}"), f"{prefix}-obs-{set_name}",
                           [Table(["Image", "Class / file", "Similarity", "Caption"], rows,
                                  align=["c", "l", "r", "l"], widths=[2.2, 2.6, 1.6, 6])]))
    return out


def _manifest_blocks(ld: _Loaded) -> list[Block]:
    r = ld.result
    rows = [("Result key", r.result_key or "(not stored)")]
    if ld.created_at is not None:
        rows.append(("Stored at", _date(ld.created_at)))
    rows += _flatten(r.manifest)
    blocks: list[Block] = [KeyValues(rows)]
    if r.timings:
        trows = [[k, f"{v:.3f}"] for k, v in r.timings.items()]
        trows.append(["Total", f"{sum(r.timings.values()):.3f}"])
        blocks.append(Table(["Stage", "Seconds"], trows, align=["l", "r"], widths=[5, 2], caption="Timings"))
    return blocks


def _candidates_table(ld: _Loaded, cache: ImageCache) -> Table:
    """All candidates in one table (run reports): the original image is shown once above."""
    r, rows = ld.result, []
    for i, c in enumerate(r.candidates):
        edited = ld.image(cache, c.edited_artifact, THUMB_PX) if c.edited_artifact else None
        kind = {"image": "Edit", "prompt": "Prompt"}.get(c.intervention_kind or "", "Intervention")
        text = f"{c.hypothesis or DASH}\n{kind}: {c.intervention or DASH}"
        if c.error:
            text += f"\nFailed: {c.error}"
        rows.append([f"{i + 1}" + (" \u2713" if r.selected_index == i else ""),
                     edited.with_text(f"Counterfactual {i + 1}") if edited else DASH, text,
                     f"{fmt_prob(c.prob_true_before)} \u2192 {fmt_prob(c.prob_true_after)}", fmt_cei(c.cei)])
    return Table(["#", "Counterfactual", "Hypothesis and intervention", "P(true) before \u2192 after", "CEI"], rows,
                 align=["c", "c", "l", "r", "r"], widths=[0.7, 2.2, 6, 2.2, 1.5],
                 caption="\u2713 marks the selected candidate.")


def _observations_table(ld: _Loaded, cache: ImageCache) -> Table:
    rows: list[list[Cell]] = []
    for o in sorted(ld.result.observations, key=lambda o: (o.set_name or "?").upper()):
        thumb = ld.image(cache, o.thumbnail_artifact, THUMB_PX)
        name = _display_name(o.image_path)
        rows.append([(o.set_name or "?").upper(), thumb.with_text(clip(name)) if thumb else DASH,
                     _label(o.label_name, o.label_index), fmt_num(o.similarity), o.caption or DASH])
    return Table(["Set", "Image", "Class", "Similarity", "Caption"], rows, align=["c", "c", "l", "r", "l"],
                 widths=[0.7, 2.0, 2.6, 1.6, 6],
                 caption="Set A: true class, B: predicted class (correctly classified references), C: random.")


def _wanted_images(ld: _Loaded, compact: bool) -> Iterator[tuple[Any, int]]:
    """(artifact path, size) of every image the sections of `ld` will show, for ImageCache.prefetch."""
    r, art = ld.result, ld.artifacts
    yield art.get(r.sample.image_artifact or ""), MAIN_IMAGE_PX
    for name in r.evidence.values():
        yield art.get(name), MAIN_IMAGE_PX
    for c in r.candidates:
        yield art.get(c.edited_artifact or ""), THUMB_PX if compact else MAIN_IMAGE_PX
    for o in r.observations:
        yield art.get(o.thumbnail_artifact or ""), THUMB_PX


def _diagnosis_children(ld: _Loaded, cache: ImageCache, prefix: str, compact: bool = False) -> list[Section]:
    r = ld.result
    children = []
    if r.candidates:
        if compact:
            children.append(Section("Candidates and counterfactual tests", f"{prefix}-cands",
                                    [_candidates_table(ld, cache)]))
        else:
            children.append(Section("Candidates and counterfactual tests", f"{prefix}-cands",
                                    children=[_candidate_section(ld, i, c, cache, prefix)
                                              for i, c in enumerate(r.candidates)]))
    if r.observations:
        if compact:
            children.append(Section("Observations", f"{prefix}-obs", [_observations_table(ld, cache)]))
        else:
            children.append(Section("Observations", f"{prefix}-obs",
                                    children=_observation_sections(ld, cache, prefix)))
    return children


def build_single_report(result, store, *, image_format: str = "png",
                        ctx: JobContext | None = None) -> ReportDocument:
    """Report of one diagnosis. `result`: an ExplanationResult (its `result_key` locates the artifacts),
    a StoredResult, or a result key. Images are lossless PNG unless `image_format="jpeg"`."""
    ctx = ctx or null_context()
    ctx.progress("Building report", 0, 1)
    ld = _resolve_single(result, store)
    r, s, cache = ld.result, ld.result.sample, ImageCache(image_format)
    cache.prefetch(_wanted_images(ld, compact=False))
    sections = [
        Section("Image and prediction", "sample", _sample_blocks(ld, cache, with_evidence=True)),
        Section("Explanation", "explanation", _explanation_blocks(ld)),
        *_diagnosis_children(ld, cache, "d"),
        Section("Reproducibility manifest", "manifest", _manifest_blocks(ld)),
    ]
    ctx.progress("Building report", 1, 1)
    return ReportDocument(
        kind="single",
        title=f"Why was \u201c{clip(s.true_name)}\u201d classified as \u201c{clip(s.pred_name)}\u201d?",
        subtitle=f"{clip(r.method)} diagnosis of {clip(_display_name(s.image_path), 120)}",
        generated_at=_now(), sections=sections, meta=_doc_meta())


def _doc_meta() -> list[tuple[str, str]]:
    from ... import __version__
    return [("Generated by", f"NEMO Desktop {__version__}")]


# ------------------------------------------------------------------------------------------- runs
def _histogram(groups: dict[str, list[float]]) -> Histogram | None:
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


def _global_explanation(run: dict, store) -> list[Block] | None:
    """From the run config's `global_explanation`, else from the newest global explanation that
    `nemo global` stored for this run (and its CEI score, when it was scored)."""
    g = (run.get("config") or {}).get("global_explanation")
    score = None
    if g is None:
        from ..analyses.global_explanation import GLOBAL_KIND, SCORE_KIND  # the kinds `nemo global` writes

        found = store.find(kind=GLOBAL_KIND, run_id=run["run_id"], limit=1)
        if found:
            g = dict(found[0].payload)
            g.setdefault("text", g.get("explanation"))
            scores = store.find(kind=SCORE_KIND, global_key=found[0].key, limit=1)
            score = scores[0].payload if scores else None
    if g is None or g == "":
        return None
    if isinstance(g, str):
        return [Paragraph(g, "callout")]
    blocks: list[Block] = [Paragraph(str(g.get("text") or "(no global explanation was produced)"), "callout")]
    rows = []
    if g.get("method"):
        n = g.get("count")
        rows.append(("Aggregated from", f"{n} explanation{'' if n == 1 else 's'} of {g['method']}"
                     if n is not None else str(g["method"])))
    if g.get("error"):
        rows.append(("Error", str(g["error"])))
    if isinstance(g.get("cei"), (int, float)):
        rows.append(("CEI as the explanation of every sample", fmt_cei(g["cei"])))
    if score:
        rows.append(("Mean CEI, global explanation", fmt_cei(score.get("mean_global"))))
        rows.append(("Mean CEI, per-sample explanations", fmt_cei(score.get("mean_local"))))
        rows.append(("Samples compared", str(score.get("paired", DASH))))
    if rows:
        blocks.append(KeyValues(rows))
    return blocks


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
    hist = _histogram({m: [ld.result.cei for ld in loaded if ld.method == m
                           and ld.result.cei is not None and math.isfinite(ld.result.cei)]
                       for m in dict.fromkeys(methods)})
    if hist:
        sections.append(Section("CEI distribution", "cei-chart", [hist]))
    g = _global_explanation(run, store)
    if g:
        sections.append(Section("Global explanation", "global", g))

    # One section per sample; several methods on one image share it.
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
    if index_rows:
        sections.append(Section("Index of samples", "index", [
            Index(["#", "Image", "True", "Predicted"] + [f"CEI {clip(m, 30)}" for m in method_order], index_rows)]))
    if failures:
        sections.append(Section("Failed or missing items", "failures", [
            Table(["Item", "Status", "Error"], failures, widths=[3, 1.5, 6])]))
    manifest = _run_manifest(loaded)
    if manifest:
        sections.append(Section("Reproducibility manifest (all results)", "manifest", manifest))
    sections += sample_sections
    ds_clf = ", ".join(x for x in (_name_of(config.get("dataset")), _name_of(config.get("classifier"))) if x)
    return ReportDocument(
        kind="run", title=f"Run report: {run_id}",
        subtitle=f"{len(by_sample)} samples, {len(method_order)} method(s)" + (f", {ds_clf}" if ds_clf else ""),
        generated_at=_now(), sections=sections, meta=_doc_meta())
