"""The report section of the `model-diff` analysis (kind "model"): how two classifiers differ, in words.

Each explanation is shown as written by the LLM (escaped by the renderers, like all model text) with one sentence
giving its held-out scores and their n; an explanation that did not hold up (Completeness at or below zero, or
undefined) or that failed is said so plainly. The evidence is the held-out conditions with the largest measured
differences, each as a sentence with its n and the stored images on which the two models disagree.
"""
from __future__ import annotations

from typing import Any

from ...base.job_context import JobContext
from ..document import (
    DASH,
    THUMB_PX,
    Figures,
    Highlighted,
    KeyValues,
    Paragraph,
    ReportDocument,
    Section,
    Table,
)
from ..format import _flatten, _now, clip
from ..images import ImageCache
from . import result_report

METHOD_TITLES = {"raw-differences": "Raw Differences", "summarization": "Summarization",
                 "optimization": "Optimization", "user": "Your hypothesis"}


def score_sentence(score: Any) -> str:
    """One sentence with an explanation's held-out scores and their n (also used by `nemo compare`)."""
    if score is None:
        return "Not scored."
    s = score if isinstance(score, dict) else score.__dict__
    n = s["n"]
    if s.get("completeness_undefined"):
        comp = (f"Completeness is undefined on {n} held-out conditions (the measured differences or the evaluator's "
                f"answers are constant), reported as 0.00")
    else:
        comp = f"Completeness {s['completeness']:+.2f} (Pearson correlation over {n} held-out conditions)"
    parts = [comp]
    if s.get("density") is not None:
        parts.append(f"Density {s['density']:+.2f}" + (" (perturbed Completeness undefined)"
                                                          if s.get("density_undefined") else ""))
    parts.append(f"{s['tokens']} tokens")
    text = ", ".join(parts) + "."
    if s.get("unparsed") or s.get("unparsed_dropped"):
        text += (f" The evaluator's answer could not be read for {s.get('unparsed', 0)} of {n} questions"
                 + (f" ({s.get('unparsed_dropped', 0)} with words dropped)" if s.get("unparsed_dropped") else "")
                 + "; they count as 'cannot be determined'.")
    return text


def held_up(score: Any) -> bool:
    return score is not None and not score.completeness_undefined and score.completeness > 0


def explanation_blocks(e: Any) -> list:
    title = METHOD_TITLES.get(e.method, e.method)
    if e.error:
        return [Paragraph(f"{title} produced no explanation: {e.error}", "warning")]
    blocks: list = []
    if e.method == "raw-differences":
        lines = e.text.splitlines()
        blocks.append(Paragraph(f"{title}: the {len(lines)} measured result lines themselves (first 20 shown).",
                                "muted"))
        blocks.append(Paragraph("\n".join(lines[:20]) + ("\n..." if len(lines) > 20 else "")))
    else:
        blocks.append(Paragraph(e.text, "callout"))
    blocks.append(Paragraph(f"{title}, from {e.observed_conditions} observed conditions. {score_sentence(e.score)}"))
    if not held_up(e.score):
        blocks.append(Paragraph("This explanation did not hold up: an evaluator reading it does not predict which "
                                "model wins on the held-out conditions better than chance.", "warning"))
    return blocks + attribution_blocks(e.attribution)


def attribution_sentence(a: Any) -> str:
    """How the attribution was computed, in one sentence (also used by `nemo compare`)."""
    unit = "word" if a.words_per_unit == 1 else f"span of up to {a.words_per_unit} words"
    auc = DASH if a.auc is None else f"{a.auc:.3f}"
    return (f"Token attribution: each {unit} was left out in turn and the explanation asked again on the first "
            f"{a.conditions} held-out conditions (Completeness there {a.completeness:+.2f}); the shade is the drop "
            f"in Completeness without it, scaled to [0, 1] over all explanations of this run ({a.calls} evaluator "
            f"questions). Effective token ratio AUC {auc}.")


def attribution_blocks(a: Any) -> list:
    if a is None or not a.units:
        return []
    top = sorted(range(len(a.units)), key=lambda i: -a.delta[i])[:5]
    rows = [[clip(a.units[i], 120), f"{a.delta[i]:+.3f}", f"{a.score[i]:.2f}" if a.score else DASH] for i in top]
    return [Highlighted(list(a.units), list(a.score or [0.0] * len(a.units)), caption=attribution_sentence(a)),
            Table(["Words", "Completeness drop without them", "Score"], rows, align=["l", "r", "r"],
                  caption="The words that carry the most of the explanation's score; a negative drop means the "
                          "explanation is better without them.")]


def evidence_blocks(result: Any, store: Any, cache: ImageCache) -> list:
    if not result.evidence:
        return [Paragraph("No held-out condition shows a difference between the two models.", "muted")]
    record = store.get(result.key) if store is not None and result.key else None
    artifacts = record.artifacts if record is not None else {}
    blocks: list = []
    for ev in result.evidence:
        better = "A" if ev.accuracy_a > ev.accuracy_b else "B"
        blocks.append(Paragraph(f"Under \u201c{ev.text}\u201d model {better} is more accurate: model A classifies "
                                f"{ev.accuracy_a:.0%} and model B {ev.accuracy_b:.0%} of n = {ev.n} images correctly."))
        images = []
        for im in ev.images:
            path = artifacts.get(im.artifact)
            got = cache.load(path, THUMB_PX) if path is not None else None
            if got is not None:
                caption = f"true {im.truth}; A: {im.prediction_a}; B: {im.prediction_b}"
                images.append(got.with_text(caption))
        if images:
            blocks.append(Figures(images, "Images of this condition on which the two models disagree."))
        elif ev.images:
            blocks.append(Paragraph("(the stored images of this condition are missing)", "muted"))
    return blocks


def heatmap_table(result: Any) -> Table | None:
    """Mean difference (A - B) per pair of the first two varying attributes, over the held-out conditions."""
    from ...analyses.model_diff.tables import difference_grid

    grid = difference_grid(result.test)
    if grid is None:
        return None
    row, col, rows, cols, cells = grid
    body = [[r, *(f"{cells[(r, c)][0]:+.2f}" if (r, c) in cells else DASH for c in cols)] for r in rows]
    n = sorted({k for _, k in cells.values()})
    return Table([f"{row} \\ {col}", *cols], body, align=["l", *("r" for _ in cols)],
                 caption=f"Accuracy of A minus B per {row} and {col} (> 0: A better), averaged over the other "
                         f"attributes; {n[0]}{'' if len(n) == 1 else f'-{n[-1]}'} held-out condition(s) per cell.")


def iteration_table(result: Any) -> Table | None:
    if not result.iterations:
        return None
    rows = []
    for r in result.iterations:
        valid = sum(e.valid for e in r.explored)
        rows.append([str(r.t), f"{valid}/{len(r.explored)}", str(r.n_conditions), str(len(r.candidates)),
                     DASH if r.best_objective is None else f"{r.best_objective:+.3f}", ", ".join(r.beam),
                     str(r.llm_calls), str(r.evaluator_calls)])
    return Table(["t", "Explored (valid/proposed)", "Conditions |C_t|", "Candidates", "Best objective", "Beam",
                  "LLM calls", "Evaluator calls"], rows, align=["r", "r", "r", "r", "r", "l", "r", "r"],
                 caption="Optimization: one row per iteration (t = 0: the initial summaries).")


@result_report("model", "model-diff")
def build_model_diff_report(result, store, *, ctx: JobContext | None = None, image_format: str = "png",
                            **_: object) -> ReportDocument:
    """Report of one `model-diff` result (ModelDiffResult)."""
    man = result.manifest
    a, b = (man.get("model_a") or {}).get("id", DASH), (man.get("model_b") or {}).get("id", DASH)
    methods = Section("Explanations", "explanations")
    for e in result.explanations:
        methods.children.append(Section(METHOD_TITLES.get(e.method, e.method), f"method-{e.method}",
                                        explanation_blocks(e)))
    rows = [[METHOD_TITLES.get(e.method, e.method),
             DASH if e.score is None else f"{e.score.completeness:+.2f}" + (" (undefined)" if
                                                                           e.score.completeness_undefined else ""),
             DASH if e.score is None or e.score.density is None else f"{e.score.density:+.2f}",
             DASH if e.score is None else str(e.score.tokens), DASH if e.score is None else str(e.score.n),
             str(e.observed_conditions)] for e in result.explanations]
    summary = [Paragraph(f"Model A is {clip(a, 120)}; model B is {clip(b, 120)}. Condition source: "
                         f"{clip(str((man.get('generator') or {}).get('source', DASH)))} "
                         f"({clip(str(man.get('condition_space', DASH)))})."),
               Table(["Method", "Completeness", "Density", "Tokens", "n (held-out)", "Observed"], rows,
                     align=["l", "r", "r", "r", "r", "r"],
                     caption="Scores on the held-out conditions (evaluator: "
                             f"{clip(str((man.get('evaluator') or {}).get('id', DASH)))}).")]
    summary += [Paragraph(n, "muted") for n in result.notes]
    evidence = evidence_blocks(result, store, ImageCache(image_format))
    heatmap = heatmap_table(result)
    if heatmap is not None:
        evidence.insert(0, heatmap)
    sections = [Section("Summary", "summary", summary), methods,
                Section("Evidence: where the models differ most", "evidence", evidence)]
    table = iteration_table(result)
    if table is not None:
        sections.append(Section("Optimization trace", "iterations", [table]))
    sections.append(Section("Reproducibility manifest", "manifest", [KeyValues(_flatten(man))]))
    return ReportDocument(kind="model", title=f"How do {clip(a, 60)} and {clip(b, 60)} differ?",
                          subtitle=f"Model differences on {len(result.test)} held-out conditions",
                          generated_at=_now(), sections=sections)
