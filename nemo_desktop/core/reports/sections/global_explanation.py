"""The report section of the `global-explanation` analysis (kind "dataset")."""
from __future__ import annotations

from ...base.job_context import JobContext
from ..document import DASH, Block, KeyValues, Paragraph, ReportDocument, Section, Table
from ..format import _flatten, _now, clip, fmt_cei
from . import result_report, run_section


@run_section("Global explanation", "global")
def global_explanation_blocks(run: dict, store) -> list[Block] | None:
    """From the run config's `global_explanation`, else from the newest global explanation that
    `nemo global` stored for this run (and its CEI score, when it was scored)."""
    g = (run.get("config") or {}).get("global_explanation")
    score = None
    if g is None:
        from ...analyses.global_explanation import GLOBAL_KIND, SCORE_KIND  # the kinds `nemo global` writes

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
    return global_blocks(g, score)


def global_blocks(g: dict, score: dict | None) -> list[Block]:
    """The global explanation (`text`, `method`, `count`, `error`, `cei`) and its score as report blocks."""
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


@result_report("dataset", "global-explanation")
def build_global_report(result, store, *, ctx: JobContext | None = None, **_: object) -> ReportDocument:
    """Report of one `global-explanation` result (GlobalAnalysisResult)."""
    g, score = result.explanation, result.score
    payload = {"text": g.explanation, "method": g.method, "count": g.count, "error": g.error}
    blocks = global_blocks(payload, score.to_dict() if score is not None else None)
    sections = [Section("Global explanation", "global", blocks)]
    if score is not None and score.samples:
        rows = [[clip(s.item_id, 30), clip(s.true_name, 30), clip(s.pred_name, 30), fmt_cei(s.cei_local),
                 fmt_cei(s.cei_global), clip(s.error or "", 60)] for s in score.samples]
        sections.append(Section("CEI per sample", "samples", [
            Table(["Item", "True", "Predicted", "CEI local", "CEI global", "Error"], rows)]))
        if score.notes:
            sections[-1].blocks += [Paragraph(n, "muted") for n in score.notes]
    sections.append(Section("Reproducibility manifest", "manifest",
                            [KeyValues([(k, v) for k, v in _flatten(g.manifest)])]))
    return ReportDocument(kind="global", title=f"Global explanation of run {clip(g.run_id or DASH)}",
                          subtitle=f"{g.count} explanations" + (f" of {clip(g.method)}" if g.method else ""),
                          generated_at=_now(), sections=sections)
