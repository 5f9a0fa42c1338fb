"""The report section of the `fix` analysis (kind "fit"): the data plan (with the failure mode it started from), the
training, the before/after figures with their intervals and n, as a table and as charts (accuracy before and after
on the finding's images and on everything else; the per-class changes with the guard's margin marked), the guard's
verdict in words and the fixed model's catalog entry."""
from __future__ import annotations

from ...base.job_context import JobContext
from ..document import (DASH, BeforeAfter, BeforeAfterRow, ChangeRow, Changes, KeyValues, Paragraph, ReportDocument,
                        Section, Table)
from ..format import _flatten, _now, clip
from . import result_report


def _pct(x) -> str:
    return DASH if x is None else f"{100 * x:.1f}%"


def _change(o: dict) -> str:
    if o.get("change") is None:
        return DASH
    return f"{o['change']:+.1f} ({o['ci'][0]:+.1f} to {o['ci'][1]:+.1f})"


def _rows(name: str, o: dict) -> list[str]:
    flips = f"{o['gained']} / {o['lost']}" if "lost" in o else DASH  # results stored before they were recorded
    return [name, _pct(o.get("before")), _pct(o.get("after")), _change(o), flips, str(o.get("n", DASH))]


MAX_CLASS_BARS = 20  # the per-class chart: the flagged classes and the largest changes, worst first
VERDICT = {"keep": "Kept", "reject-regression": "Rejected: regression", "reject-no-gain": "Rejected: no gain",
           "reject-small-gain": "Rejected: gain below the minimum"}


def _ci(v) -> tuple[float, float] | None:
    return (float(v[0]), float(v[1])) if v else None


def _pct_or_none(x) -> float | None:
    return None if x is None else 100 * float(x)


def _guard_rule(g: dict) -> str:
    """The guard's thresholds in words (results stored before the minimum gain have none)."""
    gain = (f"keeps a fix only when the finding's images gain at least {g['min_gain']:g} point(s) with a 95% "
            "interval above zero, and " if g.get("min_gain") is not None else "")
    return (f"The guard {gain}rejects a fix that costs more than {g['margin']:g} point(s) on everything else "
            "(overall, or on a class whose interval excludes zero)."
            + (f" Decided by: {', '.join(DECIDED_BY[d] for d in g['decided_by'])}." if g.get("decided_by") else ""))


DECIDED_BY = {"margin": "the regression margin", "interval": "the gain's interval", "min_gain": "the minimum gain"}


def before_after_chart(result) -> BeforeAfter:
    rows = [BeforeAfterRow(name, int(o.get("n") or 0), _pct_or_none(o.get("before")), _pct_or_none(o.get("after")),
                           _ci(o.get("before_ci")), _ci(o.get("after_ci")))
            for name, o in (("The finding's images", result.affected["overall"]),
                            ("Everything else", result.rest["overall"]))]
    return BeforeAfter("Accuracy before and after the fix", rows,
                       "Held-out images only. Bars: accuracy; whiskers: 95% bootstrap intervals; n: images.")


def change_chart(result) -> Changes:
    """Everything else overall, then its classes, flagged where the guard found a regression."""
    g = result.guard
    flagged = {r["set"] for r in g.get("regressions", [])}
    o = result.rest["overall"]
    classes = [(f"class {k}", v) for k, v in result.rest["per_class"].items()]
    shown = sorted(classes, key=lambda kv: (f"{kv[0]}" not in flagged, -abs(kv[1].get("change") or 0)))
    shown = sorted(shown[:MAX_CLASS_BARS], key=lambda kv: kv[1].get("change") or 0)
    rows = [ChangeRow("Everything else", int(o.get("n") or 0), o.get("change"), _ci(o.get("ci")),
                      "everything else" in flagged)]
    rows += [ChangeRow(name, int(v.get("n") or 0), v.get("change"), _ci(v.get("ci")), name in flagged)
             for name, v in shown]
    more = (f" {len(shown)} of {len(classes)} classes shown: every flagged class and the largest changes."
            if len(classes) > len(shown) else "")
    return Changes("Change on everything else, per class", rows, float(g["margin"]),
                   f"Change in accuracy on the held-out images outside the finding (paired 95% intervals, n per "
                   f"bar); the dashed line is the guard's margin, -{g['margin']:g} point(s); red bars are the "
                   f"regressions the guard found.{more}")


def _finding_rows(result) -> list[tuple[str, str]]:
    fm = (result.data.get("description") or {}).get("failure_mode")
    if not fm:
        return []
    return [("Finding", fm["title"]), ("Its sentence", fm["sentence"]),
            ("Its images trained on (true labels)", str(fm["images"])),
            ("Left out: also held-out images", str(fm["held_out_excluded"])),
            ("Left out: no longer in the index", str(fm["missing"]))]


@result_report("fit", "fix")
def build_fix_report(result, store, *, ctx: JobContext | None = None, **_: object) -> ReportDocument:
    cfg, g = result.config, result.guard
    verdict = Paragraph(f"{VERDICT.get(g['verdict'], g['verdict'])}: {g['why']}.", "callout")
    sections = [Section("Verdict", "verdict", [verdict])]
    if result.adopts_prompt:  # mode prompt: a zero-shot classifier's class prompts, nothing trained
        sections.append(_prompt_section(result))
    else:
        sections += _training_sections(result)
    rows = [_rows("The finding's images", result.affected["overall"]), _rows("Everything else", result.rest["overall"])]
    rows += [_rows(f"  class {k}", v) for k, v in result.rest["per_class"].items()]
    sections.append(Section("Before and after", "figures", [
        before_after_chart(result), Paragraph(f"The guard's verdict: {verdict.text}", "callout"), change_chart(result),
        Table(["Held-out set", "Before", "After", "Change, points (95% paired CI)", "Images gained / lost", "n"],
              rows),
        Paragraph(_guard_rule(g), "muted")]))
    moved = result.affected["confusions"] + result.rest["confusions"]
    if moved:
        sections.append(Section("Confusions that moved", "confusions", [Table(
            ["True", "Predicted", "Before", "After"],
            [[c["true"], c["pred"], str(c["before"]), str(c["after"])] for c in moved[:15]])]))
    if result.saved and result.adopts_prompt:
        sections.append(Section("Adopted prompt set", "saved", [KeyValues([
            ("Prompt set", result.saved["name"]), ("Version", str(result.saved["version"])),
            ("Classifier", f"{result.classifier['id']} ({result.classifier.get('revision') or DASH})")])]))
    elif result.saved:
        sections.append(Section("Fixed model", "saved", [KeyValues([
            ("Catalog id", result.saved["id"] or "none (the weights alone: its family cannot load them by id)"),
            ("Weights", result.saved["weights"]),
            ("Base model", f"{result.classifier['id']} ({result.classifier.get('revision') or DASH})")])]))
    for n in result.notes:
        sections[0].blocks.append(Paragraph(n, "muted"))
    sections.append(Section("Reproducibility manifest", "manifest",
                            [KeyValues([(k, v) for k, v in _flatten({**result.manifest, "config": cfg})])]))
    subtitle = "adopting class prompts" if result.adopts_prompt else f"{cfg['mode']}, {cfg['data']} data"
    return ReportDocument(kind="fix", title=f"Fix of {clip(result.classifier['id'])}", subtitle=subtitle,
                          generated_at=_now(), sections=sections)


def _prompt_section(result) -> Section:
    p = result.prompts
    return Section("Prompts adopted", "plan", [
        Table(["Class", "Prompt before", "Prompt adopted"],
              [[name, clip(p["before"].get(name) or DASH, 70), clip(text, 70)] for name, text in p["changes"].items()]),
        KeyValues([("Held-out: the finding's images", str(result.data["affected"])),
                   ("Held-out: everything else", str(result.data["rest"])), ("Prompt set", p["set"])])])


def _training_sections(result) -> list[Section]:
    cfg, t = result.config, result.training
    plan = [[s["class"], s["source"], clip(s.get("instruction") or DASH, 70), str(s["count"])] for s in result.sources]
    return [Section("Data plan", "plan", [
        KeyValues(_finding_rows(result) + [
            ("Training images", str(result.data["train"])), ("Targeted images", str(result.data["targeted"])),
            ("Held-out: the finding's images", str(result.data["affected"])),
            ("Held-out: everything else", str(result.data["rest"]))]),
        Table(["Class", "Source", "Edit", "Images"], plan) if plan else Paragraph("No targeted data.", "muted")]),
        Section("Training", "training", [KeyValues([
            ("Mode", f"{cfg['mode']} ({result.trainable['trainable']:,} of {result.trainable['total']:,} weights)"),
            ("Epochs / steps", f"{t['epochs']} / {t['steps']}"), ("Best epoch", str(t["best_epoch"])),
            ("Stopped early", "yes" if t["stopped_early"] else "no"),
            ("Resumed after epoch", str(t["resumed_from_epoch"]) if t.get("resumed_from_epoch") else DASH),
            ("Weights kept", f"moving average over about {cfg['average_epochs']:g} epoch(s) (EMA decay "
                             f"{t['average_decay']:.4f} per step)" if t.get("average_decay") is not None
             else "the trained weights as they are"),
            ("Seconds", f"{result.timings.get('training', 0):.1f}"), ("Seed", str(cfg["seed"]))])])]
