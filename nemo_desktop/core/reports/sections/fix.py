"""The report section of the `fix` analysis (kind "fit"): the data plan, the training, the before/after figures
with their intervals and n, the guard's verdict and the fixed model's catalog entry."""
from __future__ import annotations

from ...jobs import JobContext
from ..document import DASH, KeyValues, Paragraph, ReportDocument, Section, Table
from ..format import _flatten, _now, clip
from . import result_report


def _pct(x) -> str:
    return DASH if x is None else f"{100 * x:.1f}%"


def _change(o: dict) -> str:
    if o.get("change") is None:
        return DASH
    return f"{o['change']:+.1f} ({o['ci'][0]:+.1f} to {o['ci'][1]:+.1f})"


def _rows(name: str, o: dict) -> list[str]:
    return [name, _pct(o.get("before")), _pct(o.get("after")), _change(o), str(o.get("n", DASH))]


@result_report("fit", "fix")
def build_fix_report(result, store, *, ctx: JobContext | None = None, **_: object) -> ReportDocument:
    cfg, t, g = result.config, result.training, result.guard
    verdict = {"keep": "Kept", "reject-regression": "Rejected: regression", "reject-no-gain": "Rejected: no gain"}
    sections = [Section("Verdict", "verdict", [Paragraph(f"{verdict.get(g['verdict'], g['verdict'])}: {g['why']}.",
                                                          "callout")])]
    plan = [[s["class"], s["source"], clip(s.get("instruction") or DASH, 70), str(s["count"])] for s in result.sources]
    sections.append(Section("Data plan", "plan", [
        KeyValues([("Training images", str(result.data["train"])), ("Targeted images", str(result.data["targeted"])),
                   ("Held-out: the finding's images", str(result.data["affected"])),
                   ("Held-out: everything else", str(result.data["rest"]))]),
        Table(["Class", "Source", "Edit", "Images"], plan) if plan else Paragraph("No targeted data.", "muted")]))
    sections.append(Section("Training", "training", [KeyValues([
        ("Mode", f"{cfg['mode']} ({result.trainable['trainable']:,} of {result.trainable['total']:,} weights)"),
        ("Epochs / steps", f"{t['epochs']} / {t['steps']}"), ("Best epoch", str(t["best_epoch"])),
        ("Stopped early", "yes" if t["stopped_early"] else "no"),
        ("Resumed after epoch", str(t["resumed_from_epoch"]) if t.get("resumed_from_epoch") else DASH),
        ("Seconds", f"{result.timings.get('training', 0):.1f}"), ("Seed", str(cfg["seed"]))])]))
    rows = [_rows("The finding's images", result.affected["overall"]), _rows("Everything else", result.rest["overall"])]
    rows += [_rows(f"  class {k}", v) for k, v in result.rest["per_class"].items()]
    sections.append(Section("Before and after", "figures", [
        Table(["Held-out set", "Before", "After", "Change, points (95% paired CI)", "n"], rows),
        Paragraph(f"The guard rejects a fix that costs more than {g['margin']:g} point(s) on everything else "
                  "(overall, or on a class whose interval excludes zero).", "muted")]))
    moved = result.affected["confusions"] + result.rest["confusions"]
    if moved:
        sections.append(Section("Confusions that moved", "confusions", [Table(
            ["True", "Predicted", "Before", "After"],
            [[c["true"], c["pred"], str(c["before"]), str(c["after"])] for c in moved[:15]])]))
    if result.saved:
        sections.append(Section("Fixed model", "saved", [KeyValues([
            ("Catalog id", result.saved["id"]), ("Weights", result.saved["weights"]),
            ("Base model", f"{result.classifier['id']} ({result.classifier.get('revision') or DASH})")])]))
    for n in result.notes:
        sections[0].blocks.append(Paragraph(n, "muted"))
    sections.append(Section("Reproducibility manifest", "manifest",
                            [KeyValues([(k, v) for k, v in _flatten({**result.manifest, "config": cfg})])]))
    return ReportDocument(kind="fix", title=f"Fix of {clip(result.classifier['id'])}",
                          subtitle=f"{cfg['mode']}, {cfg['data']} data", generated_at=_now(), sections=sections)
