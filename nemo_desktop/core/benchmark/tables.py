"""`nemo bench table RUN`: the NEMO paper's tables from a benchmark run, as Markdown, CSV or JSON.

  Table 1  LLM Match (a) and CEI (b): methods x (dataset, classifier); one pair per (MLLM, editor) in the run.
  Table 2  matched candidate selection: each method without / with CEI validation (methods whose config says
           `validation = true` and `variant_of = "<label of the plain one>"`; SciTX always validates).
  Table 3  editor robustness: CEI (rank) per editor, for runs with several editors.
  Table 4  MLLM backbone: LLM Match and CEI per MLLM, for runs with several MLLMs.
  Table 5  retrieval ablation: CEI of one method with `class_relevance = false` vs `true`, per classifier.

Tables 2-5 are built for every (dataset, classifier) whose run has their axis; a run made from the
matching config in resources/benchmarks/configs/ reproduces the paper's setting.

  Candidates  the mean number of distinct candidates each method scored with CEI per sample (a method that
           validates M candidates should reach M; fewer means repeated or untestable draws), and the share of
           samples whose selected candidate's edit the edit check flagged as changing the whole image (with
           `selection = "cei"`, the paper's rule, such a candidate can win; say so beside the CEI it earned).
           Also the candidates whose reply was cut off at the token limit, also after one retry with twice
           the budget, and so never tested (methods/cut_off.py; results recorded before that are left out).

Like with like (table_data.compare): the methods a table compares are averaged over the same samples, those
that all of them finished with a value (`n` is printed with every value); each left-out sample is listed
beneath the table with the method that lacks the value and why. With "missing counts as 0" (config
`[tables] missing = "zero"`, or `nemo bench table --missing zero`) a sample a method finished or finally failed
without a value counts as 0 for it; samples not yet finished by every method are still left out. LLM Match of
a sample is the mean of the judges that scored it. CEI is the selected candidate's CEI in percentage points.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..base.errors import ConfigError
from .config import validates
from .table_data import CellStats, Comparison, RunData, collect, compare, describe  # noqa: F401 - collect: API

FORMATS = ("md", "csv", "json")
TABLES = ("1", "2", "3", "4", "5", "candidates", "timings")
DEFAULT_TABLES = ("1", "2", "3", "4", "5", "candidates")
VALIDATED_SUFFIX = "-validated"  # the registry's names of the baselines' validated variants


@dataclass
class Value:
    value: float | None
    n: int = 0
    note: str = ""  # a delta or a rank
    best: bool = False


@dataclass
class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[tuple[str, list[Value]]]
    metric: list[str]  # per column: "llm_match" | "cei"
    comparisons: list[Comparison] = field(default_factory=list)  # the like-with-like groups of its values
    missing: str = "drop"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "columns": self.columns, "metrics": self.metric,
                "rows": [{"label": label, "values": [{"value": v.value, "n": v.n, "note": v.note or None,
                                                      "best": v.best} for v in values]}
                         for label, values in self.rows],
                "missing": self.missing, "comparisons": [c.to_dict() for c in self.comparisons]}


# ----------------------------------------------------------------------------------------------- tables

def _method_cfgs(data: RunData) -> dict[str, dict]:
    methods = ((data.run.get("config") or {}).get("config") or {}).get("methods") or []
    out = {}
    for m in methods:
        if isinstance(m, str):
            m = {"method": m}
        name = m.get("method")
        options = m.get("options") or {}
        out[m.get("label", name)] = {"method": name, "options": options, "variant_of": m.get("variant_of"),
                                     "validation": bool(m.get("validation", validates(name, options)))}
    # "<name>-validated" pairs with the plain "<name>" when the config does not say otherwise.
    for label, c in out.items():
        if c["validation"] and not c["variant_of"] and c["method"].endswith(VALIDATED_SUFFIX):
            base = c["method"][:-len(VALIDATED_SUFFIX)]
            c["variant_of"] = next((lb for lb, o in out.items() if o["method"] == base and not o["validation"]),
                                   None)
    return out


def _named(axes: dict[str, list], axis: str) -> list:
    """The models on an axis ("mllm", "editor"), without None (cells that ran without one)."""
    return [x for x in axes[axis] if x is not None]


def _get(data: RunData, dataset, classifier, mllm, editor, method) -> CellStats | None:
    c = data.cells.get((dataset, classifier, mllm, editor, method))
    if c is None and editor is not None:
        c = data.cells.get((dataset, classifier, mllm, None, method))  # zero-shot cells have no editor
    return c


def _compared(data: RunData, label: str, cells: dict[str, CellStats | None], metric: str,
              comparisons: list[Comparison]) -> dict[str, Value]:
    """Values of `cells` (row -> cell) compared on the same samples; the comparison is kept for the notes."""
    c = compare(label, cells, metric, data.missing)
    comparisons.append(c)
    return {row: Value(c.means[row], c.n if cells[row] is not None and c.means[row] is not None else 0)
            for row in cells}


def _mark_best(table: Table) -> Table:
    for j in range(len(table.columns)):
        vals = [row[1][j] for row in table.rows if row[1][j].value is not None]
        if vals:
            top = max(v.value for v in vals)
            for v in vals:
                v.best = v.value == top
    return table


def _metric_name(metric: str) -> str:
    return "LLM Match" if metric == "llm_match" else "CEI"


def table1(data: RunData) -> list[Table]:
    ax = data.axes
    pairs = [(d, c) for d in ax["dataset"] for c in ax["classifier"]
             if any(k[0] == d and k[1] == c for k in data.cells)]
    editors = _named(ax, "editor") or [None]
    out = []
    for m in ax["mllm"]:
        for e in editors:
            suffix = "" if len(ax["mllm"]) == 1 and len(editors) == 1 else \
                f" (MLLM {m or '-'}, editor {e or '-'})"
            columns = [f"{d} / {c}" for d, c in pairs]
            for tid, metric, name in (("1a", "llm_match", "LLM Match"), ("1b", "cei", "CEI")):
                comparisons: list[Comparison] = []
                per_column = [_compared(data, f"{d} / {c}", {meth: _get(data, d, c, m, e, meth)
                                                             for meth in ax["method"]}, metric, comparisons)
                              for d, c in pairs]
                rows = [(meth, [col[meth] for col in per_column]) for meth in ax["method"]]
                out.append(_mark_best(Table(f"table{tid}", f"Table 1{tid[1]}. {name}{suffix}", columns, rows,
                                            [metric] * len(columns), comparisons, data.missing)))
    return out


def table2(data: RunData) -> list[Table]:
    cfgs = _method_cfgs(data)
    validated = {label: c["variant_of"] for label, c in cfgs.items() if c["validation"]}
    if not any(validated.values()):
        return []
    ax = data.axes
    bases = [label for label in ax["method"] if label not in validated]
    rows_spec = [(b, b, next((v for v, base in validated.items() if base == b), None)) for b in bases]
    rows_spec += [(v, None, v) for v, base in validated.items() if not base and v in ax["method"]]
    out = []
    for d, c, m, e in _contexts(data):
        # Every cell of the table (each method with and without validation) on the same samples, per metric.
        cells = {(label, k): (_get(data, d, c, m, e, name) if name else None)
                 for label, plain, val in rows_spec for k, name in ((0, plain), (1, val))}
        comparisons: list[Comparison] = []
        by_metric = {metric: _compared(data, _metric_name(metric), {f"{lb} ({'w/' if k else 'w/o'} validation)": cell
                                                                    for (lb, k), cell in cells.items()},
                                       metric, comparisons) for metric in ("llm_match", "cei")}
        rows = []
        for label, _, _ in rows_spec:
            vals = [by_metric[metric][f"{label} ({'w/' if k else 'w/o'} validation)"]
                    for k in (0, 1) for metric in ("llm_match", "cei")]
            for k in (0, 1):
                if vals[k].value is not None and vals[k + 2].value is not None:
                    vals[k + 2].note = f"{vals[k + 2].value - vals[k].value:+.3f}" if k == 0 else \
                        f"{vals[k + 2].value - vals[k].value:+.2f}"
            rows.append((label, vals))
        out.append(Table("table2", f"Table 2. Matched candidate selection ({d} / {c}{_ctx_suffix(data, m, e)})",
                         ["w/o validation: LLM Match", "w/o validation: CEI", "w/ validation: LLM Match",
                          "w/ validation: CEI"], rows, ["llm_match", "cei", "llm_match", "cei"], comparisons,
                         data.missing))
    return out


def table3(data: RunData) -> list[Table]:
    ax = data.axes
    editors = _named(ax, "editor")
    if len(editors) < 2:
        return []
    out = []
    for d in ax["dataset"]:
        for c in ax["classifier"]:
            for m in ax["mllm"]:
                if not any(k[:3] == (d, c, m) and k[3] in editors for k in data.cells):
                    continue
                comparisons: list[Comparison] = []
                vals = _compared(data, "CEI, every method and editor",
                                 {(meth, e): data.cells.get((d, c, m, e, meth)) for meth in ax["method"]
                                  for e in editors}, "cei", comparisons)
                rows = [(meth, [vals[(meth, e)] for e in editors]) for meth in ax["method"]]
                for j in range(len(editors)):
                    ranked = sorted((r[1][j].value, i) for i, r in enumerate(rows) if r[1][j].value is not None)
                    for rank, (_, i) in enumerate(reversed(ranked), start=1):
                        rows[i][1][j].note = f"({rank})"
                out.append(_mark_best(Table("table3", f"Table 3. CEI per image editor ({d} / {c}"
                                                      f"{'' if len(ax['mllm']) == 1 else f', MLLM {m}'})",
                                            editors, rows, ["cei"] * len(editors), comparisons, data.missing)))
    return out


def table4(data: RunData) -> list[Table]:
    ax = data.axes
    mllms = _named(ax, "mllm")
    if len(mllms) < 2:
        return []
    out = []
    editors = _named(ax, "editor") or [None]
    for d in ax["dataset"]:
        for c in ax["classifier"]:
            for e in editors:
                if not any(k[0] == d and k[1] == c for k in data.cells):
                    continue
                columns, metrics = [], []
                for m in mllms:
                    columns += [f"{m}: LLM Match", f"{m}: CEI"]
                    metrics += ["llm_match", "cei"]
                comparisons: list[Comparison] = []
                cells = {(meth, m): _get(data, d, c, m, e, meth) for meth in ax["method"] for m in mllms}
                by_metric = {metric: _compared(data, f"{_metric_name(metric)}, every method and MLLM", cells,
                                               metric, comparisons) for metric in ("llm_match", "cei")}
                rows = [(meth, [by_metric[metric][(meth, m)] for m in mllms for metric in ("llm_match", "cei")])
                        for meth in ax["method"]]
                out.append(_mark_best(Table("table4", f"Table 4. MLLM backbone ({d} / {c}"
                                                      f"{'' if len(editors) == 1 else f', editor {e}'})",
                                            columns, rows, metrics, comparisons, data.missing)))
    return out


def table5(data: RunData) -> list[Table]:
    cfgs = _method_cfgs(data)
    by_method: dict[str, dict[bool, str]] = {}
    for label, c in cfgs.items():
        if "class_relevance" in c["options"] or c["method"] == "scitx":
            rel = bool(c["options"].get("class_relevance", True))
            by_method.setdefault(c["method"], {}).setdefault(rel, label)
    pairs = {name: v for name, v in by_method.items() if len(v) == 2}
    out = []
    ax = data.axes
    names = {False: "Correctness + Semantic Similarity", True: "+ Class Relevance"}
    for name, variants in pairs.items():
        for d in ax["dataset"]:
            for m in ax["mllm"]:
                editors = _named(ax, "editor") or [None]
                for e in editors:
                    comparisons: list[Comparison] = []
                    per_column = [_compared(data, c, {names[r]: _get(data, d, c, m, e, variants[r])
                                                      for r in (False, True)}, "cei", comparisons)
                                  for c in ax["classifier"]]
                    rows = [(names[r], [col[names[r]] for col in per_column]) for r in (False, True)]
                    if all(v.value is None for _, vals in rows for v in vals):
                        continue
                    out.append(_mark_best(Table("table5", f"Table 5. Observation retrieval ({name}, {d}, CEI"
                                                          f"{_ctx_suffix(data, m, e)})",
                                                list(ax["classifier"]), rows, ["cei"] * len(ax["classifier"]),
                                                comparisons, data.missing)))
    return out


def candidates_table(data: RunData) -> list[Table]:
    """Per method and context: the mean number of distinct candidates scored with CEI per finished sample, the
    candidates whose reply was cut off at the token limit (in all; results recorded before they were counted
    are left out), and the share of samples whose selected candidate's edit was flagged as changing the whole
    image."""
    contexts = list(_contexts(data))
    if not contexts:
        return []
    columns = [f"{d} / {c}{_ctx_suffix(data, m, e)}" for d, c, m, e in contexts]

    def per_cell(values_of, summary, table_id: str, title: str, metric: str = "count") -> list[Table]:
        rows = []
        for meth in data.axes["method"]:
            cells = [_get(data, d, c, m, e, meth) for d, c, m, e in contexts]
            values = [values_of(cell) if cell is not None else [] for cell in cells]
            rows.append((meth, [Value(summary(v) if v else None, len(v)) for v in values]))
        if all(v.value is None for _, vals in rows for v in vals):
            return []
        return [Table(table_id, title, columns, rows, [metric] * len(columns), [], data.missing)]

    return (per_cell(lambda cell: cell.distinct_scored, statistics.fmean, "candidates",
                     "Distinct candidates scored per sample (mean)")
            + per_cell(lambda cell: cell.cut_off, sum, "cut_off",
                       "Candidates whose reply was cut off at the token limit, not tested (total)", "total")
            + per_cell(lambda cell: cell.selected_flagged, lambda flags: 100.0 * sum(flags) / len(flags), "flagged",
                       "Selected explanations whose edit changed the whole image (% of samples)"))


def timings_table(data: RunData) -> list[Table]:
    """Per-stage seconds per sample (as the methods recorded them) and the runner's own per-sample time."""
    stages: dict[str, list[float]] = {}
    judge: list[float] = []
    for p in data.samples:
        t = p.get("timings") or {}
        for stage, s in (t.get("stages") or {}).items():
            stages.setdefault(stage, []).append(float(s))
        if t.get("judge_s"):
            judge.append(float(t["judge_s"]))
    rows = [(stage, [Value(statistics.fmean(v), len(v)), Value(sum(v), len(v))]) for stage, v in stages.items()]
    if judge:
        rows.append(("judges (LLM Match)", [Value(statistics.fmean(judge), len(judge)), Value(sum(judge), len(judge))]))
    computed = sum(int(r.get("computed") or 0) for r in data.shard_records)
    runner = sum(float(r.get("runner_s") or 0) for r in data.shard_records)
    if computed:
        rows.append(("runner overhead", [Value(runner / computed, computed), Value(runner, computed)]))
    if not rows:
        return []
    return [Table("timings", "Per-stage timings (seconds)", ["mean per sample", "total"], rows, ["s", "s"])]


def _contexts(data: RunData) -> list[tuple]:
    ax = data.axes
    out = []
    for d in ax["dataset"]:
        for c in ax["classifier"]:
            for m in ax["mllm"]:
                editors = _named(ax, "editor") or [None]
                for e in editors:
                    if any(k[0] == d and k[1] == c and k[2] == m and k[3] in (e, None) for k in data.cells):
                        out.append((d, c, m, e))
    return out


def _ctx_suffix(data: RunData, m, e) -> str:
    ax = data.axes
    parts = []
    if len(ax["mllm"]) > 1:
        parts.append(f"MLLM {m}")
    if len(_named(ax, "editor")) > 1:
        parts.append(f"editor {e}")
    return "".join(f", {p}" for p in parts)


BUILDERS = {"1": table1, "2": table2, "3": table3, "4": table4, "5": table5, "candidates": candidates_table,
            "timings": timings_table}


def build_tables(data: RunData, which: Iterable[str] | None = None) -> list[Table]:
    which = list(which) if which else list(DEFAULT_TABLES)
    bad = [w for w in which if w not in BUILDERS]
    if bad:
        raise ConfigError(f"Unknown table(s): {', '.join(bad)}.", hint=f"Tables: {', '.join(TABLES)}.")
    return [t for w in which for t in BUILDERS[w](data)]


# ------------------------------------------------------------------------------------------- rendering

def _fmt(v: Value, metric: str) -> str:
    if v.value is None:
        return "–"
    if metric == "total":  # a whole number of things, e.g. cut-off candidates
        text = f"{v.value:.0f}"
    else:
        text = f"{v.value:.2f}" if metric in ("cei", "count") else f"{v.value:.3f}"
    return text + (f" {v.note}" if v.note else "")


def render(data: RunData, tables: list[Table], fmt: str = "md") -> str:
    if fmt not in FORMATS:
        raise ConfigError(f"Unknown table format '{fmt}'.", hint=f"Formats: {', '.join(FORMATS)}.")
    if fmt == "json":
        return json.dumps({"run_id": data.run["run_id"], "status": data.run.get("status"),
                           "config_sha256": (data.run.get("config") or {}).get("config_sha256"),
                           "tables": [t.to_dict() for t in tables],
                           "cells": [c.to_dict() for c in data.cells.values()]}, indent=2, ensure_ascii=False)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["table", "title", "row", "column", "metric", "value", "n", "note"])
        for t in tables:
            for label, values in t.rows:
                for col, metric, v in zip(t.columns, t.metric, values):
                    w.writerow([t.id, t.title, label, col, metric, "" if v.value is None else repr(v.value), v.n,
                                v.note])
        return buf.getvalue()
    out = [f"# Benchmark run {data.run['run_id']} ({data.run.get('status')})", ""]
    for t in tables:
        out += [f"## {t.title}", "", "| | " + " | ".join(t.columns) + " |",
                "|---|" + "---:|" * len(t.columns)]
        for label, values in t.rows:
            cells = []
            for metric, v in zip(t.metric, values):
                s = _fmt(v, metric)
                cells.append(f"**{s}**" if v.best and v.value is not None else s)
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        ns = sorted({v.n for _, values in t.rows for v in values if v.value is not None})
        if ns:
            out.append("")
            out.append(f"n per cell: {ns[0]}" + (f" to {ns[-1]}" if len(ns) > 1 else ""))
        notes = describe(t.comparisons)
        if notes:
            rule = ("the samples every compared method finished with a value" if t.missing == "drop" else
                    "the samples every compared method finished; a missing value counts as 0")
            out += ["", f"Compared on {rule}:", *notes]
        out.append("")
    problems = [c for c in data.cells.values() if c.failed or c.pending or c.unjudged or c.judge_failures]
    if problems:
        out += ["## Not counted", "", "| cell | failed | pending | unjudged | judge failures |",
                "|---|---:|---:|---:|---:|"]
        for c in problems:
            name = " / ".join(x for x in (c.dataset, c.classifier, c.mllm, c.editor, c.method) if x)
            out.append(f"| {name} | {c.failed} | {c.pending} | {c.unjudged} | {c.judge_failures} |")
        out.append("")
    return "\n".join(out)
