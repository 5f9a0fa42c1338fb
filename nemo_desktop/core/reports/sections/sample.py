"""The report section of a per-sample result (kind "sample": SciTX and the baselines): the image and prediction,
the explanation, candidates, observations and the reproducibility manifest; and the single-diagnosis report."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ...base.errors import ConfigError
from ...base.job_context import JobContext, null_context
from ...metrics.edit_distance import describe
from ...base.records import Candidate, ClassScore, ExplanationResult, Observation
from ..document import (DASH, MAIN_IMAGE_PX, SET_TITLES, THUMB_PX, Block, Cell, Figures, KeyValues, Paragraph,
                        ReportDocument, Section, Table)
from ..format import (_date, _display_name, _flatten, _label, _name_of, _now, _short, clip, fmt_cei, fmt_num, fmt_prob,
                      llm_match_of)
from ..images import ImageCache, ReportImage
from . import result_report


CEI_IN_WORDS = ("CEI (counterfactual explanation impact) = 100 \u00d7 (P(true | counterfactual) \u2212 "
                "P(true | original)): how many percentage points removing the hypothesised cause raised the "
                "classifier's probability of the true class. Positive: the hypothesis names something that "
                "pushed the model away from the truth.")


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
        # `sha256sum` of the file (the manifest's); the pixel hash keys results (same picture, any encoding).
        ("File SHA-256", (ld.result.manifest or {}).get("input_file_sha256") or "(not recorded)"),
        ("Pixel hash (SHA-256 of mode, size and pixels)", s.image_sha256 or DASH),
        ("True label", f"{_label(s.true_name, s.true_index)}, P = {fmt_prob(s.prob_true)}"),
        ("Predicted label", f"{_label(s.pred_name, s.pred_index)}, P = {fmt_prob(s.prob_pred)}"),
    ]))
    if s.top5:
        blocks.append(_top5_table(s.top5, "Classifier top-5 on the input image"))
    return blocks


def _explanation_blocks(ld: _Loaded) -> list[Block]:
    r = ld.result
    none_found = r.no_cause_found()
    if none_found:  # not presented as a finding: the least harmful candidate, in a neutral style
        blocks: list[Block] = [Paragraph(f"{none_found}. The least harmful candidate: {r.explanation}", "body")]
    elif r.explanation:
        blocks = [Paragraph(r.explanation, "callout")]
    else:  # tested but none selected, or nothing could be tested: said apart, with the reason
        outcome, why = r.outcome()
        head = "Tested, no cause found" if outcome == "no cause found" else "Nothing could be tested"
        blocks = [Paragraph(f"{head}: {why}", "body")]
    blocks.append(Paragraph(CEI_IN_WORDS, "muted"))
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
    title = (f"Candidate {i + 1}" + (" (selected)" if selected else "") + (" (flagged)" if c.edit_flagged else "")
             + f": CEI {fmt_cei(c.cei)}")
    kind = {"image": "Image edit instruction", "prompt": "Rewritten zero-shot prompt"}.get(
        c.intervention_kind or "", "Intervention")
    rows = [("Hypothesis", c.hypothesis or DASH),
            (kind, c.intervention or DASH),
            ("P(true) before", fmt_prob(c.prob_true_before)),
            ("P(true) after", fmt_prob(c.prob_true_after)),
            ("CEI", fmt_cei(c.cei))]
    if c.edit_distance is not None:
        rows.append(("Distance from the original", describe(c.edit_distance, c.edit_distance_metric,
                                                            c.edit_flagged, structure=c.edit_structure,
                                                            verdict=c.edit_verdict)))
        if c.edit_verdict_reason:
            rows.append(("Verdict", c.edit_verdict_reason))
    blocks: list[Block] = [KeyValues(rows)]
    if c.edit_flagged:
        blocks.append(Paragraph("The edit changed the whole image: its CEI may come from the destruction of the "
                                "image, not from the hypothesis.", "warning"))
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
    return Section(title, f"{prefix}-cand-{i + 1}", blocks, keep_together=True)


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
        # The methods record their own wall-clock "total"; summing the stages again would count it twice.
        stages = {k: v for k, v in r.timings.items() if k != "total"}
        trows = [[k, f"{v:.3f}"] for k, v in stages.items()]
        total = r.timings.get("total", sum(stages.values()))
        trows.append(["Total (wall clock)" if "total" in r.timings else "Total", f"{total:.3f}"])
        blocks.append(Table(["Stage", "Seconds"], trows, align=["l", "r"], widths=[5, 2], caption="Timings"))
    return blocks


def _candidates_table(ld: _Loaded, cache: ImageCache) -> Table:
    """All candidates in one table (run reports): the original image is shown once above."""
    r, rows = ld.result, []
    for i in r.candidate_order():
        c = r.candidates[i]
        edited = ld.image(cache, c.edited_artifact, THUMB_PX) if c.edited_artifact else None
        kind = {"image": "Edit", "prompt": "Prompt"}.get(c.intervention_kind or "", "Intervention")
        text = f"{c.hypothesis or DASH}\n{kind}: {c.intervention or DASH}"
        if c.error:
            text += f"\nFailed: {c.error}"
        if c.edit_distance is not None:
            moved = describe(c.edit_distance, c.edit_distance_metric, c.edit_flagged, structure=c.edit_structure,
                             verdict=c.edit_verdict)
            text += f"\nDistance from the original: {moved}"
            if c.edit_verdict_reason:
                text += f"\nVerdict: {c.edit_verdict_reason}"
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
                                    children=[_candidate_section(ld, i, r.candidates[i], cache, prefix)
                                              for i in r.candidate_order()]))
    if r.observations:
        if compact:
            children.append(Section("Observations", f"{prefix}-obs", [_observations_table(ld, cache)]))
        else:
            children.append(Section("Observations", f"{prefix}-obs",
                                    children=_observation_sections(ld, cache, prefix)))
    return children


@result_report("sample")
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
    from .... import __version__
    return [("Generated by", f"NEMO Desktop {__version__}")]
