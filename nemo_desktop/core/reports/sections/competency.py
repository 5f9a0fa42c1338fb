"""Report sections of the competency analyses: `competency-cf` (one image: competency and its parts, each
generator's counterfactual with its |difference| map and metrics, the MLLM's explanations) and
`competency-estimator` (the fit: data, calibration, per-class statistics with their n, warnings)."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image

from ...analyses.competency.results import calibration_source_text, low_part
from ...base.job_context import JobContext, null_context
from ..document import DASH, MAIN_IMAGE_PX, THUMB_PX, Block, Figures, KeyValues, Paragraph, ReportDocument, Section, Table
from ..format import _display_name, _flatten, _now, clip, fmt_num
from ..images import ReportImage
from . import result_report
from .competency_charts import calibration_chart, parts_chart

MIN_SHOWN_PX = 128  # classifier-size images (often 32 px in tests, 224 px in use) are enlarged to at least this


def _image(artifacts: dict[str, Any], name: str | None, max_side: int, caption: str) -> ReportImage | None:
    """A stored image artifact as PNG, enlarged with nearest-neighbour (pixels stay visible) when small and
    shrunk when large; None when missing or unreadable (the report then says so)."""
    path = artifacts.get(name or "")
    if path is None:
        return None
    try:
        with Image.open(Path(path)) as im:
            im.load()
            im = im.convert("RGB") if im.mode not in ("RGB", "L") else im.copy()
    except (OSError, ValueError):
        return None
    side, k = max(im.size), 1
    if side < MIN_SHOWN_PX:
        k = -(-MIN_SHOWN_PX // side)
        im = im.resize((im.width * k, im.height * k), Image.NEAREST)
    elif side > max_side:
        im.thumbnail((max_side, max_side), Image.LANCZOS)
    buf = io.BytesIO()
    im.save(buf, "PNG")
    # `upscale` makes the caption say the real size and the HTML draw the pixels square, as for other images.
    return ReportImage(buf.getvalue(), im.width, im.height, upscale=k).with_text(caption)


def _missing(what: str) -> Paragraph:
    return Paragraph(f"{what}: image not available (the artifact is missing or unreadable).", "warning")


def _artifacts(result, store) -> dict[str, Any]:
    stored = store.get(result.result_key) if (store is not None and result.result_key) else None
    return dict(stored.artifacts) if stored is not None else {}


def diagnosis(score, threshold: float) -> str:
    """One sentence on which part of competency is low."""
    part = low_part(score, threshold)
    if part == "competent":
        return f"The classifier is competent on this image (competency {score.competency:.3f} >= {threshold})."
    unsure, unfamiliar = part in ("unsure", "both"), part in ("unfamiliar", "both")
    parts = []
    if unsure:
        parts.append(f"the classifier is unsure (confidence {score.confidence:.3f})")
    if unfamiliar:
        parts.append(f"the image is unfamiliar (probability of being in-distribution {score.id_probability:.3f}; "
                     f"reconstruction loss {score.loss_z_score:+.2f} standard deviations from the predicted class's "
                     "calibration mean)")
    if part == "product":  # each part is at or above the threshold but their product is not
        parts.append(f"neither part is below {threshold} (confidence {score.confidence:.3f}, P(in-distribution) "
                     f"{score.id_probability:.3f}), but their product is")
    return f"Competency is low ({score.competency:.3f} < {threshold}): " + " and ".join(parts) + "."


def _score_rows(s) -> list[tuple[str, str]]:
    return [("Competency", fmt_num(s.competency)),
            ("Classifier confidence (unsure when low)", fmt_num(s.confidence)),
            ("P(in-distribution) (unfamiliar when low)", fmt_num(s.id_probability)),
            ("Reconstruction loss", fmt_num(s.reconstruction_loss, 5)),
            ("Loss z-score (predicted class)", f"{s.loss_z_score:+.2f}"),
            ("Predicted class", f"{clip(s.pred_name)} (#{s.pred_index})")]


def _outcome(o, threshold: float) -> str:
    if o.competency_after is None:
        return "failed (see below)" if o.error else "failed"
    if o.success:
        return f"reached {threshold}"
    return f"did NOT reach {threshold}"


def _counterfactual_blocks(result, artifacts: dict[str, Any], threshold: float) -> list[Block]:
    rows, blocks = [], []
    for o in result.counterfactuals:
        name = o.method.upper()
        cf = _image(artifacts, o.artifact, THUMB_PX, f"{name} counterfactual")
        diff = _image(artifacts, o.diff_artifact, THUMB_PX, f"{name} |difference|")
        rows.append([name, cf or DASH, diff or DASH,
                     f"{fmt_num(o.competency_before)} \u2192 {fmt_num(o.competency_after)}", _outcome(o, threshold),
                     DASH if o.iterations is None else str(o.iterations), fmt_num(o.lpips),
                     fmt_num(o.feature_similarity), fmt_num(o.latent_similarity), fmt_num(o.seconds, 2)])
    blocks.append(Table(["Generator", "Counterfactual", "Abs. difference", "Competency before \u2192 after", "Outcome",
                         "Iterations", "LPIPS", "Feature cos", "Latent cos", "Seconds"], rows,
                        align=["l", "c", "c", "r", "l", "r", "r", "r", "r", "r"],
                        widths=[1.3, 2.2, 2.2, 2.2, 2.2, 1.2, 1.1, 1.2, 1.2, 1.1],
                        caption=f"One image (n = 1) per generator; a counterfactual succeeds when its competency "
                                f"reaches {threshold}. LPIPS: lower is more similar (missing when its weights "
                                "are not installed); cosine similarities: higher is more similar."))
    failed = [o for o in result.counterfactuals if o.success is False]
    if failed:
        blocks.append(Paragraph(
            f"{', '.join(o.method.upper() for o in failed)} did not reach competency {threshold}: the image shown is "
            "the closest they found, not one on which the classifier is competent.", "warning"))
    for o in result.counterfactuals:
        if o.error:
            blocks.append(Paragraph(f"{o.method.upper()}: {o.error}", "warning"))
    if result.manifest.get("lpips_unavailable"):
        blocks.append(Paragraph(f"No LPIPS values: {result.manifest['lpips_unavailable']}", "muted"))
    return blocks


def _explanation_blocks(result) -> list[Block]:
    blocks: list[Block] = []
    if result.explanation_without is not None:
        blocks += [Paragraph("From the image alone:", "muted"), Paragraph(result.explanation_without, "callout")]
    for o in result.counterfactuals:
        if o.explanation is not None:
            blocks += [Paragraph(f"With the {o.method.upper()} counterfactual (original left, counterfactual right):",
                                 "muted"), Paragraph(o.explanation, "callout")]
    if not blocks:
        blocks.append(Paragraph("There is no language explanation (no multimodal LLM was given, explanation was "
                                "switched off, or every call failed: see the notes).", "muted"))
    return blocks


@result_report("sample", "competency-cf")
def build_competency_report(result, store, *, image_format: str = "png", ctx: JobContext | None = None,
                            **_: object) -> ReportDocument:
    """Report of one CompetencyCounterfactualResult (its `result_key` locates the stored images)."""
    ctx = ctx or null_context()
    ctx.progress("Building report", 0, 1)
    artifacts = _artifacts(result, store)
    threshold = float((result.manifest.get("config") or {}).get("threshold", 0.9))
    figs, blocks = [], []
    for name, caption in ((result.input_artifact, "Input image"), (result.evidence.get("reconstruction"),
                                                                    "Autoencoder reconstruction")):
        im = _image(artifacts, name, MAIN_IMAGE_PX, caption)
        if im is None:
            blocks.append(_missing(caption))
        else:
            figs.append(im)
    s = result.original
    blocks = ([Figures(figs)] if figs else []) + blocks + [
        Paragraph(diagnosis(s, threshold), "callout"),
        Figures([parts_chart(s.confidence, s.id_probability, s.competency, threshold)]),
        KeyValues([("File", result.image_path or DASH), ("SHA-256", result.image_sha256), *_score_rows(s)])]
    blocks += [Paragraph(n, "muted") for n in result.notes]
    sections = [Section("Competency", "competency", blocks),
                Section("High-competency counterfactuals", "counterfactuals",
                        _counterfactual_blocks(result, artifacts, threshold)),
                Section("Why is competency low?", "explanation", _explanation_blocks(result)),
                Section("Reproducibility manifest", "manifest",
                        [KeyValues([("Result key", result.result_key or "(not stored)"),
                                    *_flatten(result.manifest)])])]
    ctx.progress("Building report", 1, 1)
    return ReportDocument(kind="single", title="Why is the classifier not competent on this image?",
                          subtitle=f"Competency of {clip(_display_name(result.image_path) or result.image_sha256[:12])}"
                                   f": {s.competency:.3f}",
                          generated_at=_now(), sections=sections)


@result_report("fit", "competency-estimator")
def build_estimator_report(result, store, *, ctx: JobContext | None = None, **_: object) -> ReportDocument:
    """Report of one EstimatorFitResult: what it was fitted on, its calibration and per-class statistics."""
    m, cal, st = result.manifest, result.calibration, result.statistics
    d = m.get("dataset") or {}
    names = m.get("class_names") or []
    n_cal = d.get("n_calibration")
    overview = [("Classifier", f"{clip((m.get('classifier') or {}).get('id'))} (revision "
                               f"{clip(str((m.get('classifier') or {}).get('revision')))})"),
                ("Dataset", f"{clip(d.get('name') or DASH)}: {d.get('n_images')} images, {d.get('n_train')} to "
                            "train the autoencoder"),
                ("Calibrated on", clip(calibration_source_text(d), 200)),
                ("Dataset fingerprint", str(d.get("fingerprint", DASH))),
                ("Calibration z", fmt_num(cal.get("z"), 2)),
                (f"Mean competency on the calibration images (n = {n_cal})", fmt_num(cal.get("mean_competency"))),
                (f"Classifier accuracy on the calibration images (n = {n_cal})", fmt_num(cal.get("accuracy")))]
    losses = (m.get("training") or {}).get("loss_per_epoch") or []
    if losses:
        overview.append(("Autoencoder training", f"{len(losses)} epochs, final loss {losses[-1]:.5f}"))
    blocks: list[Block] = [KeyValues(overview)]
    if cal.get("at_bound"):
        blocks.append(Paragraph(
            f"The calibration stopped at the end of its search range (z = {fmt_num(cal.get('z'), 2)}): the mean "
            f"competency on the held-out images ({fmt_num(cal.get('mean_competency'))}) could not be brought to the "
            f"classifier's accuracy ({fmt_num(cal.get('accuracy'))}); widen the range (z_max) and fit again.",
            "warning"))
    blocks += [Paragraph(w, "warning") for w in result.warnings]
    rows = [[clip(names[c] if c < len(names) else str(c)), str(st["count"][c]), fmt_num(st["mean"][c], 5),
             fmt_num(st["std"][c], 5), "pooled" if st["pooled"][c] else ""] for c in range(len(st["count"]))]
    stats = Table(["Class", "n", "Mean loss", "Std", ""], rows, align=["l", "r", "r", "r", "l"],
                  widths=[4, 1, 2, 2, 1.5],
                  caption="Reconstruction-loss statistics of the held-out images by true class; a class with fewer "
                          "than 2 images or no spread uses the pooled values.")
    grid, curve = cal.get("grid") or [], cal.get("curve") or []
    step = max(1, len(grid) // 10)
    cal_rows = [[fmt_num(z, 2), fmt_num(c)] for z, c in list(zip(grid, curve))[::step]]
    sections = [Section("Competency estimator", "estimator", blocks),
                Section("Per-class statistics", "statistics", [stats])]
    if cal_rows:
        sections.append(Section("Calibration search", "calibration", [Figures([calibration_chart(
            grid, curve, float(cal.get("accuracy") or 0.0), float(cal.get("z") or 0.0), n_cal)]), Table(
            ["z", "Mean competency"], cal_rows, align=["r", "r"], widths=[2, 2],
            caption=f"Mean competency on the held-out images (n = {n_cal}) for every {step}th z tried; the "
                    f"chosen z brings it closest to the classifier's accuracy.")]))
    sections.append(Section("Reproducibility manifest", "manifest", [KeyValues(
        [("Result key", result.result_key or "(not stored)"),
         *[(k, v) for k, v in _flatten({k: v for k, v in m.items() if k not in ("statistics", "calibration")})]])]))
    return ReportDocument(kind="single", title="Competency estimator",
                          subtitle=f"for {clip((m.get('classifier') or {}).get('id'))}", generated_at=_now(),
                          sections=sections)


@result_report("dataset", "competency-bench")
def build_bench_report(result, store, *, ctx: JobContext | None = None, **_: object) -> ReportDocument:
    """Report of one CompetencyBenchResult: the seed's Tables 1/2 shape, each row with its n."""
    m = result.manifest
    threshold = (m.get("config") or {}).get("threshold", 0.9)
    rows = []
    for r in result.rows:
        name = "Original" if r.method == "orig" else r.method.upper()
        if not r.available:
            rows.append([name, str(r.n), "unavailable", DASH, DASH, DASH, DASH, DASH, DASH])
            continue
        rate = DASH if r.method == "orig" else f"{r.success_rate:.0%} ({r.n_success}/{r.n})"
        rows.append([name, str(r.n), rate, fmt_num(r.lpips), fmt_num(r.feature_similarity),
                     fmt_num(r.latent_similarity), fmt_num(r.fd), fmt_num(r.kd, 4), fmt_num(r.seconds_per_image, 3)])
    table = Table(["Generator", "n", "Success", "LPIPS", "Feature cos", "Latent cos", result.feature_space, "KD",
                   "s / image"], rows, align=["l", "r", "r", "r", "r", "r", "r", "r", "r"],
                  widths=[2, 1, 2, 1.3, 1.5, 1.5, 1.5, 1.5, 1.4],
                  caption=f"Counterfactuals of the {m.get('n_used')} low-competency images used (of "
                          f"{m.get('n_low_competency')} below {threshold} among {m.get('n_images')} images). Success: "
                          f"competency reaches {threshold}. LPIPS and the cosine similarities are means over the "
                          f"successful pairs (the original row: over all). {result.feature_space} and KD compare each "
                          f"set with {result.n_reference} reference images ({m.get('reference', 'given')}); lower "
                          "is closer.")
    blocks: list[Block] = [table]
    if result.n_reference < 2:
        blocks.append(Paragraph(f"FD and KD are missing: they need at least 2 reference images (there are "
                                f"{result.n_reference}).", "warning"))
    blocks += _bench_notes(result.rows)
    sections = [Section("Counterfactual generators compared", "bench", blocks),
                Section("Reproducibility manifest", "manifest", [KeyValues(
                    [("Result key", result.result_key or "(not stored)"), *_flatten(m)])])]
    return ReportDocument(kind="single", title="Competency counterfactuals compared",
                          subtitle=f"{m.get('n_used')} low-competency images", generated_at=_now(), sections=sections)


def _bench_notes(rows) -> list[Paragraph]:
    """Each distinct note once, naming the generators it concerns ("LPIPS unavailable" was said six times, once
    per row); a warning when every generator it names could not run."""
    named: dict[str, list] = {}
    for r in rows:
        for note in r.notes:
            if r not in named.setdefault(note, []):
                named[note].append(r)
    out = []
    for note, owners in named.items():
        names = ", ".join("Original" if r.method == "orig" else r.method.upper() for r in owners)
        where = "All generators" if len(owners) == len(rows) > 1 else names
        out.append(Paragraph(f"{where}: {note}", "warning" if not any(r.available for r in owners) else "muted"))
    return out


@result_report("dataset", "competency-score")
def build_score_set_report(result, store, *, ctx: JobContext | None = None, shown: int = 30,
                           **_: object) -> ReportDocument:
    """Report of one CompetencyScoreSet: the distribution, why images are low, and the lowest ones."""
    from ..document import Histogram, HistogramSeries

    sm, t = result.summary(), result.threshold
    n = sm["n"]
    rows = [("Images scored", str(n)),
            (f"Below competency {t}", f"{sm['n_low']} of {n}"),
            ("... of which the classifier is unsure (confidence low)", f"{sm['n_unsure']} of {sm['n_low']}"),
            ("... of which the image is unfamiliar (P(in-distribution) low)", f"{sm['n_unfamiliar']} of {sm['n_low']}"),
            ("... of which both", f"{sm['n_both']} of {sm['n_low']}"),
            ("... of which neither part alone (only their product is below)",
             f"{sm.get('n_product', 0)} of {sm['n_low']}"),
            (f"Mean competency (n = {n})", fmt_num(sm["mean_competency"]))]
    if sm.get("n_labelled"):
        rows += [(f"Accuracy of the low-competency images (n = {sm['n_labelled_low']})", _pct(sm["accuracy_low"])),
                 (f"Accuracy of the others (n = {sm['n_labelled_high']})", _pct(sm["accuracy_high"]))]
    blocks: list[Block] = [KeyValues(rows)]
    if result.manifest.get("labels_not_used"):
        blocks.append(Paragraph(f"The set's labels were not used: {result.manifest['labels_not_used']}", "muted"))
    if result.failed:
        blocks.append(Paragraph(f"{len(result.failed)} image(s) could not be scored: " + "; ".join(
            f"{clip(_display_name(p), 60)}: {clip(e, 120)}" for p, e in list(result.failed.items())[:10]),
            "warning"))
    edges = [k / 10 for k in range(11)]
    series = []
    groups = [("All images", result.items)]
    if sm.get("n_labelled"):
        groups += [("Correctly classified", [i for i in result.items if i.correct]),
                   ("Misclassified", [i for i in result.items if i.correct is False])]
    for label, items in groups:
        counts = [0] * 10
        for i in items:
            counts[min(9, int(i.score.competency * 10))] += 1
        series.append(HistogramSeries(label, counts, len(items), (sum(i.score.competency for i in items) / len(items))
                                      if items else None))
    blocks.append(Histogram("Competency distribution", "competency", edges, series))
    low_rows = []
    for i in result.lowest(shown):
        s = i.score
        low_rows.append([clip(_display_name(i.path), 60), fmt_num(s.competency), fmt_num(s.confidence),
                         fmt_num(s.id_probability), f"{s.loss_z_score:+.2f}", clip(s.pred_name, 30),
                         DASH if i.correct is None else ("yes" if i.correct else "no")])
    lowest = Table(["Image", "Competency", "Confidence", "P(ID)", "Loss z", "Predicted", "Correct"], low_rows,
                   align=["l", "r", "r", "r", "r", "l", "c"], widths=[4, 1.6, 1.6, 1.4, 1.3, 2.4, 1.2],
                   caption=f"The {len(low_rows)} lowest-competency images of {n}.")
    sections = [Section("Competency of the set", "summary", blocks),
                Section("Lowest competency", "lowest", [lowest]),
                Section("Reproducibility manifest", "manifest", [KeyValues(
                    [("Result key", result.result_key or "(not stored)"), *_flatten(result.manifest)])])]
    return ReportDocument(kind="single", title="Competency of an image set", subtitle=f"{n} images",
                          generated_at=_now(), sections=sections)


def _pct(x) -> str:
    return DASH if x is None else f"{x:.0%}"
