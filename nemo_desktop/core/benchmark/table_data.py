"""What the tables are computed from: every (cell, sample) of a benchmark run with its values, and the
like-with-like comparison of several cells.

`collect` reads the run's items into CellStats (one per cell: dataset, classifier, MLLM, editor, method), each
holding one SampleOutcome per sample: finished ("done"), finally failed, or still pending, with its LLM Match
and CEI when it has them. `compare` takes the cells one table compares and keeps only the samples that all
of them finished with a value of the metric, so that every method's mean is over the same samples; what it
left out, and why, goes beneath the table. With `missing = "zero"` a sample a method finished (or finally
failed) without a value counts as 0 for that method instead; samples some method has not finished yet are
left out either way.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import ConfigError
from ..methods.validation import normalise_hypothesis
from .records import DONE, FAILED, RUN_KIND, SAMPLE_KIND, SHARD_KIND, split_item_id

MISSING = ("drop", "zero")  # a finished sample without a value: left out for every method, or counted as 0


@dataclass
class SampleOutcome:
    status: str  # "done" | "failed" | "pending"
    llm: float | None = None
    cei: float | None = None
    why_no_llm: str | None = None
    why_no_cei: str | None = None
    distinct_scored: int | None = None  # distinct candidates with a CEI (see methods.validation.candidate_counts)
    cut_off: int | None = None  # candidates whose reply was cut at the token limit (None: not recorded, older)
    selected_flagged: bool | None = None  # the selected candidate's edit changed the whole image (edit check)
    judged: bool = False  # the run has judges (so a missing LLM Match is "unjudged")

    @property
    def finished(self) -> bool:
        return self.status in (DONE, FAILED)

    def value(self, metric: str) -> float | None:
        return self.llm if metric == "llm_match" else self.cei

    def why_missing(self, metric: str) -> str:
        if self.status != DONE:
            return self.why_no_llm or self.status  # failed / pending carry their reason in both fields
        return (self.why_no_llm if metric == "llm_match" else self.why_no_cei) or "no value"


@dataclass
class CellStats:
    dataset: str
    classifier: str
    mllm: str | None
    editor: str | None
    method: str
    samples: dict[str, SampleOutcome] = field(default_factory=dict)
    judge_failures: int = 0
    per_judge: dict[str, list[float]] = field(default_factory=dict)

    def _count(self, status: str) -> int:
        return sum(1 for o in self.samples.values() if o.status == status)

    def _present(self, name: str) -> list:
        """The samples' values of `name` where they have one."""
        return [v for v in (getattr(o, name) for o in self.samples.values()) if v is not None]

    @property
    def done(self) -> int:
        return self._count(DONE)

    @property
    def failed(self) -> int:
        return self._count(FAILED)

    @property
    def pending(self) -> int:
        return self._count("pending")

    @property
    def llm(self) -> list[float]:
        return self._present("llm")

    @property
    def cei(self) -> list[float]:
        return self._present("cei")

    @property
    def unjudged(self) -> int:
        return sum(1 for o in self.samples.values() if o.status == DONE and o.judged and o.llm is None)

    @property
    def distinct_scored(self) -> list[int]:
        return self._present("distinct_scored")

    @property
    def cut_off(self) -> list[int]:
        return self._present("cut_off")

    @property
    def selected_flagged(self) -> list[bool]:
        return self._present("selected_flagged")

    @property
    def llm_match(self) -> float | None:
        return statistics.fmean(self.llm) if self.llm else None

    @property
    def cei_mean(self) -> float | None:
        return statistics.fmean(self.cei) if self.cei else None

    @property
    def label(self) -> str:
        return " / ".join(x for x in (self.dataset, self.classifier, self.mllm, self.editor, self.method) if x)

    def to_dict(self) -> dict[str, Any]:
        cei = self.cei
        return {"dataset": self.dataset, "classifier": self.classifier, "mllm": self.mllm, "editor": self.editor,
                "method": self.method, "done": self.done, "failed": self.failed, "pending": self.pending,
                "llm_match": self.llm_match, "n_llm_match": len(self.llm), "unjudged": self.unjudged,
                "judge_failures": self.judge_failures,
                "per_judge": {k: (statistics.fmean(v) if v else None) for k, v in self.per_judge.items()},
                "cei": self.cei_mean, "n_cei": len(cei), "cei_std": statistics.stdev(cei) if len(cei) > 1 else None,
                "distinct_scored_candidates": (statistics.fmean(self.distinct_scored)
                                               if self.distinct_scored else None),
                "cut_off_candidates": sum(self.cut_off) if self.cut_off else None}


@dataclass
class RunData:
    run: dict
    cells: dict[tuple, CellStats]
    samples: list[dict]  # sample-record payloads of the finished items
    shard_records: list[dict]
    missing: str = "drop"  # see MISSING

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


def check_missing(missing: str) -> str:
    if missing not in MISSING:
        raise ConfigError(f"Unknown treatment of missing values '{missing}'.",
                          hint="'drop' compares methods on the samples all of them finished; 'zero' counts a "
                               "finished sample without a value as 0.")
    return missing


COLLECT_STAGE = "Reading results"


def collect(store: Any, run_id: str, missing: str | None = None, ctx: Any = None) -> RunData:
    """The run's cells and samples. `missing` (MISSING) overrides the run config's `[tables] missing`.
    `ctx` (a JobContext) gets the progress over the run's items (about 6,000 a second) and can cancel."""
    run = store.get_run(run_id)
    if run is None or run.get("kind") != RUN_KIND:
        raise ConfigError(f"There is no benchmark run {run_id!r} in this store.",
                          hint="`nemo bench run CONFIG` prints the run id; merged shard stores hold it too.")
    cells: dict[tuple, CellStats] = {}
    samples = []
    items = store.run_items(run_id)
    for n, it in enumerate(items):
        if ctx is not None and n % 200 == 0:
            ctx.check_cancelled()
            ctx.progress(COLLECT_STAGE, n, len(items))
        cell, sample_id = split_item_id(it["item_id"])
        parts = cell.split("|")
        if len(parts) != 5:
            continue
        key = tuple(None if p == "-" and i in (2, 3) else p for i, p in enumerate(parts))
        stats = cells.setdefault(key, CellStats(*key))
        if it["status"] == FAILED:
            why = f"failed ({_error_text(it.get('error'))})"
            stats.samples[sample_id] = SampleOutcome(FAILED, why_no_llm=why, why_no_cei=why)
            continue
        rec = store.get(it["result_key"]) if it["status"] == DONE and it.get("result_key") else None
        if rec is None or rec.kind != SAMPLE_KIND:
            why = f"not finished ({it['status']})"
            stats.samples[sample_id] = SampleOutcome("pending", why_no_llm=why, why_no_cei=why)
            continue
        samples.append(rec.payload)
        stats.samples[sample_id] = _outcome(rec.payload, stats)
    if ctx is not None:
        ctx.progress(COLLECT_STAGE, len(items), len(items))
    shards = [r.payload for r in store.find(kind=SHARD_KIND, run_id=run_id)]
    configured = ((run.get("config") or {}).get("tables") or {}).get("missing", "drop")
    return RunData(run, cells, samples, shards, check_missing(missing or configured))


def _outcome(p: dict, stats: CellStats) -> SampleOutcome:
    o = SampleOutcome(DONE)
    result = p.get("result") or {}
    llm = p.get("llm_match")
    if isinstance(llm, dict):
        o.judged = True
        if llm.get("score") is not None:
            o.llm = float(llm["score"])
        elif not result.get("explanation"):
            o.why_no_llm = "no explanation"
        else:
            o.why_no_llm = "no judge gave a score"
        stats.judge_failures += int(llm.get("failures") or 0)
        for name, v in (llm.get("judges") or {}).items():
            scores = stats.per_judge.setdefault(name, [])
            if v.get("score") is not None:
                scores.append(float(v["score"]))
    else:
        o.why_no_llm = "not judged (the run has no judges)"
    if p.get("cei") is not None and math.isfinite(float(p["cei"])):
        o.cei = float(p["cei"])
    else:
        o.why_no_cei = "no explanation" if not result.get("explanation") else "no CEI"
    o.distinct_scored = _distinct_scored(result)
    o.cut_off = _cut_off(result)
    o.selected_flagged = _selected_flagged(result)
    return o


def _selected_flagged(result: dict) -> bool | None:
    """Whether the explanation kept was one whose edit the edit check flagged; None when no candidate was
    selected or its edit was not measured (a zero-shot counterfactual edits no image; older results)."""
    i, cands = result.get("selected_index"), result.get("candidates")
    if not isinstance(i, int) or not isinstance(cands, list) or not 0 <= i < len(cands):
        return None
    chosen = cands[i] if isinstance(cands[i], dict) else {}
    if chosen.get("edit_distance") is None:
        return None
    return bool(chosen.get("edit_flagged"))


def _distinct_scored(result: dict) -> int | None:
    counts = (result.get("manifest") or {}).get("candidate_counts")
    if isinstance(counts, dict) and counts.get("distinct_scored") is not None:
        return int(counts["distinct_scored"])
    cands = result.get("candidates")
    if not isinstance(cands, list):
        return None
    return len({normalise_hypothesis(c["hypothesis"]) for c in cands
                if isinstance(c, dict) and c.get("cei") is not None and c.get("hypothesis")})


def _cut_off(result: dict) -> int | None:
    """Candidates of the sample whose reply was cut at the token limit; None for results recorded before
    cut replies were recognised (their counts have no "cut_off": a cut reply was then read as a hypothesis)."""
    counts = (result.get("manifest") or {}).get("candidate_counts")
    value = counts.get("cut_off") if isinstance(counts, dict) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _error_text(error: Any) -> str:
    text = error.get("message") if isinstance(error, dict) else error
    text = " ".join(str(text or "no reason recorded").split())
    return text if len(text) <= 80 else text[:77] + "..."


# ------------------------------------------------------------------------------------------- comparing

@dataclass
class Comparison:
    """One group of cells compared on the same samples (one column of Table 1, one metric of Table 2...)."""

    label: str  # where in the table, e.g. "imagenet-d / CLIP" or "CEI"
    metric: str
    means: dict[str, float | None]  # row label -> mean over the compared samples
    n: int  # compared samples
    total: int  # samples any compared cell has
    dropped: dict[str, dict[str, str]] = field(default_factory=dict)  # sample id -> {row label: why}
    zeroed: dict[str, dict[str, str]] = field(default_factory=dict)  # sample id -> {row label: why} (zero mode)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "metric": self.metric, "n": self.n, "total": self.total,
                "dropped": self.dropped, "counted_as_zero": self.zeroed}


def compare(label: str, cells: dict[str, CellStats | None], metric: str, missing: str = "drop") -> Comparison:
    """Means of `metric` of the given cells (row label -> cell) over the samples all of them have values for
    (`missing="drop"`), or all of them finished (`"zero"`: a missing value counts as 0). Absent cells (None:
    the method was not run in this context) take no part."""
    present = {k: c for k, c in cells.items() if c is not None}
    ids = list(dict.fromkeys(s for c in present.values() for s in c.samples))
    kept: list[str] = []
    dropped: dict[str, dict[str, str]] = {}
    zeroed: dict[str, dict[str, str]] = {}
    for sid in ids:
        reasons, zeros = {}, {}
        for row, cell in present.items():
            o = cell.samples.get(sid)
            if o is None:
                reasons[row] = "not in this method's run"
            elif o.value(metric) is None:
                if missing == "zero" and o.finished:
                    zeros[row] = o.why_missing(metric)
                else:
                    reasons[row] = o.why_missing(metric)
        if reasons:
            dropped[sid] = reasons
        else:
            kept.append(sid)
            if zeros:
                zeroed[sid] = zeros
    means: dict[str, float | None] = {k: None for k in cells}
    for row, cell in present.items():
        vals = [cell.samples[s].value(metric) or 0.0 for s in kept]
        means[row] = statistics.fmean(vals) if vals else None
    return Comparison(label, metric, means, len(kept), len(ids), dropped, zeroed)


def describe(comparisons: list[Comparison], max_ids: int = 5) -> list[str]:
    """Lines for beneath a table: per compared group, n of total and what was left out (or zeroed) and why."""
    lines = []
    for c in comparisons:
        if not c.total:
            continue
        head = f"- {c.label}: compared on {c.n} of {c.total} samples"
        if not c.dropped and not c.zeroed:
            lines.append(head + ".")
            continue
        lines.append(head + (f"; left out {len(c.dropped)}" if c.dropped else "")
                     + (f"; {len(c.zeroed)} counted as 0 for some method" if c.zeroed else "") + ":")
        for what, table in (("left out", c.dropped), ("counted as 0", c.zeroed)):
            by_reason: dict[tuple[str, str], list[str]] = {}
            for sid, reasons in table.items():
                for row, why in reasons.items():
                    by_reason.setdefault((row, why), []).append(sid)
            for (row, why), sids in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                shown = ", ".join(sids[:max_ids]) + (f" and {len(sids) - max_ids} more" if len(sids) > max_ids else "")
                lines.append(f"  - {what}: {row}: {why} ({len(sids)}: {shown})")
    return lines
