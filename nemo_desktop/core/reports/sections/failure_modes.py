"""The report of a `failure-modes` result (kind "dataset"): each failure mode as a sentence with its evidence (n,
error rate, confusions, the images nearest its prototype), the sentences of every method side by side, the
settings and thresholds, and the evaluation when there was one. Sentence texts come from files or an LLM: they
are plain strings here and both renderers escape them."""
from __future__ import annotations

from pathlib import Path

from ...analyses.failure_modes.describe import (METHOD_LABELS, confirmed, describe_cluster, error_rate,
                                                fallback_text, holds_up, pct)
from ...analyses.failure_modes.result import FailureModesResult, GroupResult, HardCluster
from ...base.job_context import JobContext, null_context
from ..document import (DASH, THUMB_PX, Block, Figures, KeyValues, Paragraph, ReportDocument, Section,
                        Table)
from ..format import _flatten, _now, clip, fmt_num
from ..images import ImageCache
from . import result_report

THUMBS_PER_CLUSTER = 6


def _settings_rows(result: FailureModesResult) -> list[tuple[str, str]]:
    c = result.config
    rows = [("Images analysed", str(result.index.get("rows", DASH))),
            ("Split", str(c.get("split"))), ("Split margin a", fmt_num(c.get("a"))),
            ("Clusters per set", str(c.get("clusters") if c.get("clusters") is not None else "paper default")),
            ("Linkage", str(c.get("linkage"))), ("Sentences per cluster K", str(c.get("k"))),
            ("Threshold tau", fmt_num(c.get("tau")) if c.get("tau") is not None else "auto"),
            ("Methods", ", ".join(METHOD_LABELS.get(m, m) for m in result.methods)),
            ("Sentence sets", ", ".join(map(str, c.get("sentence_sets", [])))),
            ("Sentences", str(len(result.sentences))),
            ("Relevance", str(c.get("relevance")))]
    if c.get("relevance") == "vqa":
        rel = result.manifest.get("relevance") or {}
        rows.append(("VQA question", str(rel.get("question") or c.get("vqa_question") or DASH)))
    if result.p_at_k:
        rows.append(("P@K size K", str(c.get("p_at_k", DASH))))
    emb = result.manifest.get("embedder") or {}
    rows.append(("Joint space", f"{emb.get('id', DASH)} ({result.manifest.get('joint_space', DASH)})"))
    clf = result.manifest.get("classifier") or {}
    rows.append(("Classifier", str(clf.get("id", DASH))))
    return rows


def _group_rows(g: GroupResult) -> list[tuple[str, str]]:
    s = g.split
    rows = [("Images", str(g.size)), ("Accuracy", pct(g.accuracy)),
            ("Split score", str(s.get("score"))),
            ("Hard / easy / neutral", f"{s.get('hard')} / {s.get('easy')} / {s.get('neutral')}")]
    if s.get("hard_threshold") is not None:
        rows.append(("Thresholds (hard, easy)", f"{fmt_num(s['hard_threshold'])}, {fmt_num(s['easy_threshold'])} "
                                                  f"(mean {fmt_num(s.get('mean'))}, std {fmt_num(s.get('std'))})"))
    rows.append(("tau", f"{fmt_num(g.tau)} ({g.tau_source})"))
    cl = g.clustering
    sub = [w for w in ("hard", "easy") if cl.get(f"{w}_subsampled")]
    rows.append(("Clusters found (hard, easy)", f"{cl.get('hard_found')}, {cl.get('easy_found')}"
                 + (f"; {' and '.join(sub)} set subsampled above {cl.get('max_points')} points" if sub else "")))
    return rows


def _thumbs(cluster: HardCluster, cache: ImageCache) -> list[Block]:
    by_row = dict(zip(cluster.rows, cluster.paths))
    images, missing = [], 0
    for row in cluster.nearest_rows[:THUMBS_PER_CLUSTER]:
        path = by_row.get(row)
        im = cache.load(Path(path), THUMB_PX) if path else None
        if im is None:
            missing += 1
            continue
        name = clip(Path(path).name, 40)
        images.append(im.with_text(name, f"Image {name} of the cluster"))
    blocks: list[Block] = []
    if images:
        blocks.append(Figures(images, caption="The images nearest the cluster's prototype."))
    if missing:
        blocks.append(Paragraph(f"{missing} of the nearest images could not be read (moved or deleted since the "
                                "analysis).", "muted"))
    return blocks


def _sentence_table(cluster: HardCluster, methods: list[str], star: set[int] | None) -> Table:
    header = ["Method", "#", "Sentence", "v hard", "v easy", "d"] + (["Harder?"] if star is not None else [])
    rows = []
    for m in methods:
        for i, p in enumerate(cluster.sentences.get(m, []), 1):
            label = METHOD_LABELS.get(m, m) + (" (TopS padding)" if p.get("padded") else "")
            row = [label, str(i), clip(p["text"], 160), fmt_num(p.get("v_h")),
                   fmt_num(p.get("v_e")), fmt_num(p.get("d"))]
            if star is not None:
                row.append("yes" if p["index"] in star else "no")
            rows.append(row)
    fallback = [METHOD_LABELS.get(m, m) for m, f in cluster.tau_fallback.items() if f]
    caption = ("v: cosine of the sentence with the hard / paired easy prototype; d = v hard - v easy."
               + (f" {', '.join(fallback)}: fewer than K sentences passed tau, so the rows marked 'TopS padding' "
                  "were taken by v hard alone (no contrast with the easy cluster)." if fallback else ""))
    return Table(header, rows, align=["l", "r", "l", "r", "r", "r"] + (["c"] if star is not None else []),
                 widths=[1.1, 0.4, 5, 0.9, 0.9, 0.9] + ([0.8] if star is not None else []), caption=caption)


def _cluster_section(cluster: HardCluster, g: GroupResult, number: int, methods: list[str], cache: ImageCache,
                     anchor: str) -> Section:
    text = describe_cluster(cluster, g, number, methods)
    ok, _ = holds_up(cluster, g)
    rows = [("Images (n)", str(cluster.size)), ("Error rate", f"{pct(error_rate(cluster.accuracy))} "
                                                              f"(set: {pct(error_rate(g.accuracy))})"),
            ("Severity (accuracy / set's)", fmt_num(cluster.severity)),
            ("Mean split score", fmt_num(cluster.mean_score))]
    if cluster.nearest_easy is not None:
        sizes = {e.id: e.size for e in g.easy_clusters}
        rows.append(("Nearest easy cluster", f"#{cluster.nearest_easy + 1} ({sizes.get(cluster.nearest_easy, '?')} "
                                             f"images), cosine {fmt_num(cluster.easy_similarity)}"))
    else:
        rows.append(("Nearest easy cluster", "none (the easy set is empty)"))
    if cluster.confusions:
        rows.append(("Top confusions", ", ".join(f"{c['true']} \u2192 {c['pred']} ({c['count']})"
                                                 for c in cluster.confusions)))
    blocks: list[Block] = [Paragraph(text.sentence, "callout" if ok else "warning"), KeyValues(rows)]
    blocks += [Paragraph(fallback_text(cluster, g, m) + ".", "warning") for m in methods
               if fallback_text(cluster, g, m)]
    blocks += _thumbs(cluster, cache)
    blocks.append(_sentence_table(cluster, methods, confirmed(g)))
    title = f"{'Failure mode' if ok else 'Hard cluster (did not hold up)'} {number}"
    return Section(title, anchor, blocks)


def _evaluation_blocks(result: FailureModesResult) -> list[Block]:
    if not result.evaluation:
        return []
    rows = []
    for m in result.methods:
        e = result.evaluation.get(m, {})
        rows.append([METHOD_LABELS.get(m, m)] + [f"{fmt_num(e.get(k))} (n={e.get(f'{k}_n', 0)})"
                                                  for k in ("ahr", "acr", "tpr", "ji")])
    blocks: list[Block] = [Table(["Method", "AHR", "ACR", "TPR", "JI"], rows, align=["l", "r", "r", "r", "r"],
                                 caption="Macro averages over the analysed sets; n: sets where the metric is defined. "
                                         "S*_beta: sentences whose images' accuracy is below the set's by beta = o * "
                                         "std.")]
    pk = result.p_at_k
    if pk:
        blocks.append(KeyValues([(f"P@{pk['k']} of the clusters", f"{fmt_num(pk['value'])} (n={pk['n']})")]))
        blocks.append(Paragraph(
            f"P@{pk['k']} (paper App. B) judges the clusters, which every method shares: for each sentence of "
            f"S*_beta the images it is relevant to form a ground-truth group; each hard or easy cluster ranks the "
            f"set's images by closeness to its prototype, and P@K is the mean over groups of the best overlap of a "
            f"top-{pk['k']} list with the group, divided by {pk['k']}.", "muted"))
    vqa = _vqa_blocks(result)
    return blocks + vqa


def _vqa_blocks(result: FailureModesResult) -> list[Block]:
    """The yes/no questions VQA relevance asked (model-written ones are shown so a reader can judge them)."""
    rel = result.manifest.get("relevance") or {}
    if rel.get("source") != "vqa":
        return []
    if rel.get("question") == "template":
        return [Paragraph("VQA relevance asked one fixed question per sentence, quoting it (the template "
                          f"{rel.get('prompt', DASH)}).", "muted")]
    writer = (rel.get("question_writer") or {}).get("id", DASH)
    rows = [[clip(s, 160), clip(q, 200)] for s, q in (rel.get("questions") or {}).items()]
    blocks: list[Block] = [Paragraph(
        f"VQA relevance asked each sentence's own yes/no question (paper App. C.3), written once by {writer} and "
        "followed by \"Reply simply with 'yes' or 'no'\".", "muted")]
    if rows:
        blocks.append(Table(["Sentence", "Question asked"], rows, align=["l", "l"], widths=[3, 4]))
    fell = rel.get("question_fallbacks") or []
    if fell:
        blocks.append(Paragraph(f"{len(fell)} sentence(s) got no readable question from {writer} and were asked with "
                                "the fixed template instead: " + ", ".join(f"\u201c{clip(t, 80)}\u201d" for t in fell)
                                + ".", "warning"))
    return blocks


def _cei_blocks(result: FailureModesResult) -> list[Block]:
    cv = result.cei_validation
    if not cv:
        return []
    st = cv.get("settings", {})
    rows = []
    for v in cv.get("validations", []):
        where = "" if v["group"] == "all" else f" ({clip(v['group'], 30)})"
        held = {True: "yes", False: "did not hold up", None: "not tested"}[v["held_up"]]
        rows.append([f"{v['cluster']}{where}", METHOD_LABELS.get(v["method"], v["method"]), clip(v["sentence"], 160),
                     f"{v['n']} / {v['tested']}", fmt_num(v["mean_cei"]), held])
    blocks: list[Block] = [Paragraph(
        "Each sentence is the hypothesis of the counterfactual test on the failure mode's misclassified images: the "
        "condition it names is removed (an image edit, or the zero-shot prompt rewritten) and CEI is the change of "
        f"the true class's probability in points. A sentence holds up when its mean CEI is above "
        f"{fmt_num(st.get('threshold', 0.0))}; one that does not describes the images without being shown to cause "
        "the errors.")]
    if rows:
        blocks.append(Table(["Mode", "Method", "Sentence", "n / tried", "Mean CEI", "Held up?"], rows,
                            align=["l", "l", "l", "r", "r", "c"], widths=[0.8, 0.8, 5, 0.9, 0.9, 1.2],
                            caption=f"n: misclassified images with a CEI (at most {st.get('max_images', DASH)} per "
                                    "sentence)."))
    blocks += [Paragraph(v["verdict"], "warning" if v["held_up"] is False else "muted")
               for v in cv.get("validations", []) if v["held_up"] is not True]
    blocks += [Paragraph(n, "muted") for n in cv.get("notes", [])]
    return blocks


@result_report("dataset", "failure-modes")
def build_failure_modes_report(result: FailureModesResult, store, *, ctx: JobContext | None = None,
                               image_format: str = "png", **_: object) -> ReportDocument:
    """Report of one `failure-modes` result."""
    ctx = ctx or null_context()
    cache = ImageCache(image_format)
    methods = result.methods
    summary: list[Block] = []
    sections: list[Section] = []
    n_modes = 0
    for gi, g in enumerate(result.groups):
        ctx.check_cancelled()
        ctx.progress("Building report", gi, len(result.groups))
        children = []
        for i, c in enumerate(g.hard_clusters, 1):
            t = describe_cluster(c, g, i, methods)
            n_modes += t.holds
            summary.append(Paragraph(t.sentence, "body" if t.holds else "muted"))
            children.append(_cluster_section(c, g, i, methods, cache, f"g{gi}c{i}"))
        group_blocks: list[Block] = [KeyValues(_group_rows(g))]
        if not g.hard_clusters:
            group_blocks.append(Paragraph("No image of this set is hard by the split: there is no failure mode to "
                                          "describe.", "warning"))
        group_blocks += [Paragraph(n, "muted") for n in g.notes]
        title = "Whole dataset" if g.class_index is None else f"Class \u201c{clip(g.name, 60)}\u201d"
        sections.append(Section(title, f"g{gi}", group_blocks, children))
    head: list[Block] = summary or [Paragraph("No hard cluster was found.", "warning")]
    head += [Paragraph(n, "muted") for n in result.notes]
    out = [Section("Failure modes", "summary", head), Section("Settings", "settings", [KeyValues(_settings_rows(result))])]
    ev = _evaluation_blocks(result)
    if ev:
        out.append(Section("Evaluation", "evaluation", ev))
    cei = _cei_blocks(result)
    if cei:
        out.append(Section("CEI validation of the sentences", "cei", cei))
    out += sections
    out.append(Section("Reproducibility manifest", "manifest",
                       [KeyValues([(k, v) for k, v in _flatten(result.manifest)])]))
    ctx.progress("Building report", len(result.groups), len(result.groups))
    clf = (result.manifest.get("classifier") or {}).get("id") or result.index.get("classifier_id") or DASH
    data = result.index.get("dataset_root") or result.index.get("index_id") or DASH
    return ReportDocument(kind="failure-modes", title=f"Where does {clip(str(clf), 60)} fail?",
                          subtitle=f"{n_modes} failure mode{'s' if n_modes != 1 else ''} in "
                                   f"{clip(Path(str(data)).name, 80)} ({result.index.get('rows', '?')} images)",
                          generated_at=_now(), sections=out)
