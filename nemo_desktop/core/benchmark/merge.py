"""`nemo bench merge`: combine the stores of the shards of a benchmark run into one store.

For every benchmark run in the source stores (or only `run_id`): the run is created in the target with the
same configuration (its hash must agree, or the stores hold different experiments), and every item is copied
with the records it points to (the sample record with its artifacts, the explanation, the judges' verdicts),
plus the selections and the shards' records. An item present in several stores keeps its furthest-along
record (done > failed > explained > incomplete > error); two different finished records of one item are a
conflict, reported and resolved to the first store's. Shards that drew different selections for the same
dataset and classifier explained different samples: the merge refuses them. Copies are idempotent (keys are
content-derived), so merging again, or merging into one of the shard stores, is harmless.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..base.errors import StoreError
from ..base.job_context import JobContext, null_context
from .records import DONE, RUN_KIND, SAMPLE_KIND, SHARD_KIND, STATUS_RANK, copy_result, run_status


@dataclass
class MergeReport:
    runs: list[str] = field(default_factory=list)
    items: int = 0  # items in the target's runs after the merge
    copied_records: int = 0
    missing_records: list[str] = field(default_factory=list)  # keys a source item points to but lacks
    conflicts: list[str] = field(default_factory=list)
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)  # run -> status -> count

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def merge_stores(target: Any, sources: Sequence[Any], *, run_id: str | None = None,
                 ctx: JobContext | None = None) -> MergeReport:
    ctx = ctx or null_context()
    report = MergeReport()
    run_ids: list[str] = []
    for src in sources:
        for run in src.list_runs(RUN_KIND):
            if (run_id is None or run["run_id"] == run_id) and run["run_id"] not in run_ids:
                run_ids.append(run["run_id"])
    if run_id is not None and run_id not in run_ids:
        raise StoreError(f"None of the stores holds the benchmark run {run_id!r}.",
                         hint="`nemo bench table` lists nothing for it either; check the run id and the stores.")
    for rid in run_ids:
        _merge_run(target, sources, rid, report, ctx)
    return report


def _merge_run(target: Any, sources: Sequence[Any], run_id: str, report: MergeReport, ctx: JobContext) -> None:
    runs = [(src, src.get_run(run_id)) for src in sources]
    runs = [(src, r) for src, r in runs if r is not None]
    shas = {(r.get("config") or {}).get("config_sha256") for _, r in runs}
    existing = target.get_run(run_id)
    if existing is not None:
        shas.add((existing.get("config") or {}).get("config_sha256"))
    if len(shas) > 1:
        raise StoreError(f"The stores hold different configurations under the run id {run_id!r}.",
                         hint="Only shards of one `nemo bench run CONFIG` can be merged.")
    _check_selections(sources, run_id)
    if existing is None:
        target.create_run(RUN_KIND, runs[0][1]["config"], run_id=run_id)

    # The furthest-along record of each item, first store first.
    best: dict[str, tuple[Any, dict]] = {}
    if existing is not None:
        for it in target.run_items(run_id):
            best[it["item_id"]] = (target, it)
    for src, _ in runs:
        for it in src.run_items(run_id):
            held = best.get(it["item_id"])
            if held is None or STATUS_RANK.get(it["status"], -1) > STATUS_RANK.get(held[1]["status"], -1):
                best[it["item_id"]] = (src, it)
            elif (it["status"] == DONE == held[1]["status"] and it["result_key"] != held[1]["result_key"]):
                report.conflicts.append(f"{run_id}: {it['item_id']} has two different results; kept the first")

    for n, (iid, (src, it)) in enumerate(sorted(best.items())):
        ctx.check_cancelled()
        ctx.progress(f"Merging {run_id}", n, len(best))
        if src is not target and it.get("result_key"):
            for key in _referenced_keys(src, it):
                if not target.has(key):
                    if copy_result(src, target, key):
                        report.copied_records += 1
                    else:
                        report.missing_records.append(key)
        if src is not target:
            target.add_run_item(run_id, iid, it.get("result_key"), it["status"], it.get("error"))
    ctx.progress(f"Merging {run_id}", len(best), len(best))  # the bar ends full
    for src, _ in runs:
        for rec in src.find(kind=SHARD_KIND, run_id=run_id):
            for key in [rec.key, *(s.get("key") for s in (rec.payload.get("selections") or {}).values())]:
                if key and not target.has(key) and copy_result(src, target, key):
                    report.copied_records += 1
    counts: dict[str, int] = {}
    for it in target.run_items(run_id):
        counts[it["status"]] = counts.get(it["status"], 0) + 1
    report.items += sum(counts.values())
    report.statuses[run_id] = counts
    report.runs.append(run_id)
    target.set_run_status(run_id, run_status(target, run_id))


def _referenced_keys(store: Any, item: dict) -> list[str]:
    """The item's record, and for a sample record the explanation and verdicts it was built from."""
    key = item["result_key"]
    keys = [key]
    rec = store.get(key)
    if rec is not None and rec.kind == SAMPLE_KIND:
        if rec.payload.get("explanation_key"):
            keys.append(rec.payload["explanation_key"])
        for v in ((rec.payload.get("llm_match") or {}).get("judges") or {}).values():
            if v.get("key"):
                keys.append(v["key"])
    return keys


def _check_selections(sources: Sequence[Any], run_id: str) -> None:
    seen: dict[str, tuple[str, str]] = {}
    for src in sources:
        for rec in src.find(kind=SHARD_KIND, run_id=run_id):
            for pair, sel in (rec.payload.get("selections") or {}).items():
                fp = sel.get("fingerprint")
                shard = rec.payload.get("shard", "?")
                if pair in seen and seen[pair][0] != fp:
                    raise StoreError(
                        f"Shards {seen[pair][1]} and {shard} of run {run_id} selected different images for {pair}.",
                        hint="The datasets or the classifier's predictions differed between the machines; run every "
                             "shard on the same data (and weights), then merge again.")
                seen.setdefault(pair, (fp, shard))
