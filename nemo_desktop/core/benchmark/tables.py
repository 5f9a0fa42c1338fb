"""`nemo bench table RUN`: the NEMO paper's tables from a benchmark run, as Markdown, CSV or JSON.

  Table 1  LLM Match (a) and CEI (b): methods x (dataset, classifier); one pair per (MLLM, editor) in the run.
  Table 2  matched candidate selection: each method without / with CEI validation (methods whose config says
           `validation = true` and `variant_of = "<label of the plain one>"`; SciTX always validates).
  Table 3  editor robustness: CEI (rank) per editor, for runs with several editors.
  Table 4  MLLM backbone: LLM Match and CEI per MLLM, for runs with several MLLMs.
  Table 5  retrieval ablation: CEI of one method with `class_relevance = false` vs `true`, per classifier.

Tables 2-5 are built for every (dataset, classifier) whose run has their axis; a run made from the
matching config in nemo_desktop/resources/benchmarks/configs/ reproduces the paper's setting.

Each value is the mean over the cell's finished samples; `n` counts them. LLM Match of a sample is the mean
of the judges that scored it; samples without an explanation or without any judge's score are left out
of the LLM Match mean (and counted in `unjudged`), never scored as 0. CEI is the selected candidate's CEI in
percentage points; samples without one are left out of its mean (counted in `n_cei`).
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import ConfigError
from .config import validates
from .records import DONE, FAILED, RUN_KIND, SAMPLE_KIND, SHARD_KIND, split_item_id

FORMATS = ("md", "csv", "json")
TABLES = ("1", "2", "3", "4", "5", "timings")
VALIDATED_SUFFIX = "-validated"  # the registry's names of the baselines' validated variants


@dataclass
class CellStats:
    dataset: str
    classifier: str
    mllm: str | None
    editor: str | None
    method: str
    done: int = 0
    failed: int = 0
    pending: int = 0
    llm: list[float] = field(default_factory=list)
    unjudged: int = 0
    judge_failures: int = 0
    per_judge: dict[str, list[float]] = field(default_factory=dict)
    cei: list[float] = field(default_factory=list)

    @property
    def llm_match(self) -> float | None:
        return statistics.fmean(self.llm) if self.llm else None

    @property
    def cei_mean(self) -> float | None:
        return statistics.fmean(self.cei) if self.cei else None

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "classifier": self.classifier, "mllm": self.mllm, "editor": self.editor,
                "method": self.method, "done": self.done, "failed": self.failed, "pending": self.pending,
                "llm_match": self.llm_match, "n_llm_match": len(self.llm), "unjudged": self.unjudged,
                "judge_failures": self.judge_failures,
                "per_judge": {k: (statistics.fmean(v) if v else None) for k, v in self.per_judge.items()},
                "cei": self.cei_mean, "n_cei": len(self.cei),
                "cei_std": statistics.stdev(self.cei) if len(self.cei) > 1 else None}


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

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "columns": self.columns, "metrics": self.metric,
                "rows": [{"label": label, "values": [{"value": v.value, "n": v.n, "note": v.note or None,
                                                      "best": v.best} for v in values]}
                         for label, values in self.rows]}


# ---------------------------------------------------------------------------------------------- collect

@dataclass
class RunData:
    run: dict
    cells: dict[tuple, CellStats]
    samples: list[dict]  # sample-record payloads of the finished items
    shard_records: list[dict]

    @property
    def axes(self) -> dict[str, list]:
        def order(values: Iterable, configured: list | None = None) -> list:
            seen = list(dict.fromkeys(values))
            conf = [v for v in (configured or []) if v in seen]
            return conf + [v for v in seen if v not in conf]

        cfg = (self.run.get("config") or {})
        keys = list(self.cells)
        return {"dataset": order((k[0] for k in keys), cfg.get("datasets")),
                "classifier": order((k[1] for k in keys), cfg.get("classifiers")),
                "mllm": order(k[2] for k in keys),
                "editor": order(k[3] for k in keys),
                "method": order((k[4] for k in keys), cfg.get("methods"))}


def collect(store: Any, run_id: str) -> RunData:
    run = store.get_run(run_id)
    if run is None or run.get("kind") != RUN_KIND:
        raise ConfigError(f"There is no benchmark run {run_id!r} in this store.",
                          hint="`nemo bench run CONFIG` prints the run id; merged shard stores hold it too.")
    cells: dict[tuple, CellStats] = {}
    samples = []
    for it in store.run_items(run_id):
        cell, _ = split_item_id(it["item_id"])
        parts = cell.split("|")
        if len(parts) != 5:
            continue
        key = tuple(None if p == "-" and i in (2, 3) else p for i, p in enumerate(parts))
        stats = cells.setdefault(key, CellStats(*key))
        if it["status"] == FAILED:
            stats.failed += 1
            continue
        if it["status"] != DONE or not it.get("result_key"):
            stats.pending += 1
            continue
        rec = store.get(it["result_key"])
        if rec is None or rec.kind != SAMPLE_KIND:
            stats.pending += 1
            continue
        p = rec.payload
        samples.append(p)
        stats.done += 1
        llm = p.get("llm_match")
        if isinstance(llm, dict):
            if llm.get("score") is not None:
                stats.llm.append(float(llm["score"]))
            else:
                stats.unjudged += 1
            stats.judge_failures += int(llm.get("failures") or 0)
            for name, v in (llm.get("judges") or {}).items():
                scores = stats.per_judge.setdefault(name, [])
                if v.get("score") is not None:
                    scores.append(float(v["score"]))
        if p.get("cei") is not None and math.isfinite(float(p["cei"])):
            stats.cei.append(float(p["cei"]))
    shards = [r.payload for r in store.find(kind=SHARD_KIND, run_id=run_id)]
    return RunData(run, cells, samples, shards)


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


def _get(data: RunData, dataset, classifier, mllm, editor, method) -> CellStats | None:
    c = data.cells.get((dataset, classifier, mllm, editor, method))
    if c is None and editor is not None:
        c = data.cells.get((dataset, classifier, mllm, None, method))  # zero-shot cells have no editor
    return c


def _value(stats: CellStats | None, metric: str) -> Value:
    if stats is None:
        return Value(None)
    if metric == "llm_match":
        return Value(stats.llm_match, len(stats.llm))
    return Value(stats.cei_mean, len(stats.cei))


def _mark_best(table: Table) -> Table:
    for j in range(len(table.columns)):
        vals = [row[1][j] for row in table.rows if row[1][j].value is not None]
        if vals:
            top = max(v.value for v in vals)
            for v in vals:
                v.best = v.value == top
    return table


def table1(data: RunData) -> list[Table]:
    ax = data.axes
    pairs = [(d, c) for d in ax["dataset"] for c in ax["classifier"]
             if any(k[0] == d and k[1] == c for k in data.cells)]
    editors = [e for e in ax["editor"] if e is not None] or [None]
    out = []
    for m in ax["mllm"]:
        for e in editors:
            suffix = "" if len(ax["mllm"]) == 1 and len(editors) == 1 else \
                f" (MLLM {m or '-'}, editor {e or '-'})"
            columns = [f"{d} / {c}" for d, c in pairs]
            for tid, metric, name in (("1a", "llm_match", "LLM Match"), ("1b", "cei", "CEI")):
                rows = [(meth, [_value(_get(data, d, c, m, e, meth), metric) for d, c in pairs])
                        for meth in ax["method"]]
                out.append(_mark_best(Table(f"table{tid}", f"Table 1{tid[1]}. {name}{suffix}", columns, rows,
                                            [metric] * len(columns))))
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
        rows = []
        for label, plain, val in rows_spec:
            s0 = _get(data, d, c, m, e, plain) if plain else None
            s1 = _get(data, d, c, m, e, val) if val else None
            vals = [_value(s0, "llm_match"), _value(s0, "cei"), _value(s1, "llm_match"), _value(s1, "cei")]
            for k in (0, 1):
                if vals[k].value is not None and vals[k + 2].value is not None:
                    vals[k + 2].note = f"{vals[k + 2].value - vals[k].value:+.3f}" if k == 0 else \
                        f"{vals[k + 2].value - vals[k].value:+.2f}"
            rows.append((label, vals))
        out.append(Table("table2", f"Table 2. Matched candidate selection ({d} / {c}{_ctx_suffix(data, m, e)})",
                         ["w/o validation: LLM Match", "w/o validation: CEI", "w/ validation: LLM Match",
                          "w/ validation: CEI"], rows, ["llm_match", "cei", "llm_match", "cei"]))
    return out


def table3(data: RunData) -> list[Table]:
    ax = data.axes
    editors = [e for e in ax["editor"] if e is not None]
    if len(editors) < 2:
        return []
    out = []
    for d in ax["dataset"]:
        for c in ax["classifier"]:
            for m in ax["mllm"]:
                if not any(k[:3] == (d, c, m) and k[3] in editors for k in data.cells):
                    continue
                rows = [(meth, [_value(data.cells.get((d, c, m, e, meth)), "cei") for e in editors])
                        for meth in ax["method"]]
                for j in range(len(editors)):
                    ranked = sorted((r[1][j].value, i) for i, r in enumerate(rows) if r[1][j].value is not None)
                    for rank, (_, i) in enumerate(reversed(ranked), start=1):
                        rows[i][1][j].note = f"({rank})"
                out.append(_mark_best(Table("table3", f"Table 3. CEI per image editor ({d} / {c}"
                                                      f"{'' if len(ax['mllm']) == 1 else f', MLLM {m}'})",
                                            editors, rows, ["cei"] * len(editors))))
    return out


def table4(data: RunData) -> list[Table]:
    ax = data.axes
    mllms = [m for m in ax["mllm"] if m is not None]
    if len(mllms) < 2:
        return []
    out = []
    editors = [e for e in ax["editor"] if e is not None] or [None]
    for d in ax["dataset"]:
        for c in ax["classifier"]:
            for e in editors:
                if not any(k[0] == d and k[1] == c for k in data.cells):
                    continue
                columns, metrics = [], []
                for m in mllms:
                    columns += [f"{m}: LLM Match", f"{m}: CEI"]
                    metrics += ["llm_match", "cei"]
                rows = [(meth, [v for m in mllms for v in (_value(_get(data, d, c, m, e, meth), "llm_match"),
                                                           _value(_get(data, d, c, m, e, meth), "cei"))])
                        for meth in ax["method"]]
                out.append(_mark_best(Table("table4", f"Table 4. MLLM backbone ({d} / {c}"
                                                      f"{'' if len(editors) == 1 else f', editor {e}'})",
                                            columns, rows, metrics)))
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
    for name, variants in pairs.items():
        for d in ax["dataset"]:
            for m in ax["mllm"]:
                editors = [e for e in ax["editor"] if e is not None] or [None]
                for e in editors:
                    rows = [("Correctness + Semantic Similarity",
                             [_value(_get(data, d, c, m, e, variants[False]), "cei") for c in ax["classifier"]]),
                            ("+ Class Relevance",
                             [_value(_get(data, d, c, m, e, variants[True]), "cei") for c in ax["classifier"]])]
                    if all(v.value is None for _, vals in rows for v in vals):
                        continue
                    out.append(_mark_best(Table("table5", f"Table 5. Observation retrieval ({name}, {d}, CEI"
                                                          f"{_ctx_suffix(data, m, e)})",
                                                list(ax["classifier"]), rows, ["cei"] * len(ax["classifier"]))))
    return out


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
                editors = [e for e in ax["editor"] if e is not None] or [None]
                for e in editors:
                    if any(k[0] == d and k[1] == c and k[2] == m and k[3] in (e, None) for k in data.cells):
                        out.append((d, c, m, e))
    return out


def _ctx_suffix(data: RunData, m, e) -> str:
    ax = data.axes
    parts = []
    if len(ax["mllm"]) > 1:
        parts.append(f"MLLM {m}")
    if len([x for x in ax["editor"] if x is not None]) > 1:
        parts.append(f"editor {e}")
    return "".join(f", {p}" for p in parts)


BUILDERS = {"1": table1, "2": table2, "3": table3, "4": table4, "5": table5, "timings": timings_table}


def build_tables(data: RunData, which: Iterable[str] | None = None) -> list[Table]:
    which = list(which) if which else ["1", "2", "3", "4", "5"]
    bad = [w for w in which if w not in BUILDERS]
    if bad:
        raise ConfigError(f"Unknown table(s): {', '.join(bad)}.", hint=f"Tables: {', '.join(TABLES)}.")
    return [t for w in which for t in BUILDERS[w](data)]


# ------------------------------------------------------------------------------------------- rendering

def _fmt(v: Value, metric: str) -> str:
    if v.value is None:
        return "–"
    text = f"{v.value:.2f}" if metric == "cei" else f"{v.value:.3f}"
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
        out.append("")
    problems = [c for c in data.cells.values() if c.failed or c.pending or c.unjudged or c.judge_failures]
    if problems:
        out += ["## Not counted", "", "| cell | failed | pending | unjudged | judge failures |", "|---|---:|---:|---:|---:|"]
        for c in problems:
            name = " / ".join(x for x in (c.dataset, c.classifier, c.mllm, c.editor, c.method) if x)
            out.append(f"| {name} | {c.failed} | {c.pending} | {c.unjudged} | {c.judge_failures} |")
        out.append("")
    return "\n".join(out)
