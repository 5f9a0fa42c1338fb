"""What a benchmark run keeps in the results store (shared by the runner, merge and tables).

A run (`store.create_run(RUN_KIND, ...)`) has one item per (cell, sample), `item_id = "<cell id>/<sample id>"`
with `cell id = "dataset|classifier|mllm|editor|method"` (labels from the config; "-" for none). Statuses:

  done       result_key -> a SAMPLE_KIND record: the ExplanationResult under "result" (its artifacts copied, so
             report builders find them on the same record), "llm_match", "cei", the cell's labels, timings.
  failed     a final failure (the method rejected the sample, e.g. it is classified correctly on re-check);
             error says why. Not retried unless asked (--retry-failed).
  explained  the explanation is complete and stored (result_key -> the method's "explanation" record) and
             the judges have not all answered yet; a re-run judges it without recomputing the explanation.
  incomplete the method stored a partial result (a model raised on some unit); a re-run resumes it from the
             stored units.
  error      the method raised (model load, out of memory, endpoint down); a re-run tries again.

Other records: SELECTION_KIND (the drawn misclassified samples of one dataset x classifier, with seed and
counts) and SHARD_KIND (one per `nemo bench run` invocation: shard, timings, selection fingerprints).
"""
from __future__ import annotations

from typing import Any

RUN_KIND = "benchmark"
SAMPLE_KIND = "bench-sample"
SELECTION_KIND = "bench-selection"
SHARD_KIND = "bench-shard"

DONE, FAILED, EXPLAINED, INCOMPLETE, ERROR = "done", "failed", "explained", "incomplete", "error"
# Which of two records of one item a merge keeps: the further along wins.
STATUS_RANK = {DONE: 4, FAILED: 3, EXPLAINED: 2, INCOMPLETE: 1, ERROR: 0}
NONE_LABEL = "-"


def cell_id(dataset: str, classifier: str, mllm: str | None, editor: str | None, method: str) -> str:
    return "|".join([dataset, classifier, mllm or NONE_LABEL, editor or NONE_LABEL, method])


def item_id(cell: str, sample_id: str) -> str:
    return f"{cell}/{sample_id}"


def split_item_id(item: str) -> tuple[str, str]:
    cell, _, sample = item.partition("/")
    return cell, sample


def load_artifacts(stored: Any) -> dict[str, Any]:
    """A stored result's artifacts as objects `store.put` accepts: PNG -> PIL image (re-encoded to the same
    bytes, so the copy shares the file), .npy -> array, anything else -> bytes."""
    out: dict[str, Any] = {}
    for name, path in stored.artifacts.items():
        suffix = path.suffix.lower()
        if suffix == ".png":
            out[name] = stored.load_image(name)
        elif suffix == ".npy":
            out[name] = stored.load_array(name)
        else:
            out[name] = stored.artifact_bytes(name)
    return out


def copy_result(source: Any, target: Any, key: str) -> bool:
    """Copy one result (payload and artifacts) between stores; False if the source lacks it."""
    if target.has(key):
        return True
    stored = source.get(key)
    if stored is None:
        return False
    target.put(key, stored.kind, stored.payload, load_artifacts(stored))
    return True


def expected_items(store: Any, run_id: str) -> int | None:
    """Items planned over all shards of a run, if every shard has written its record to `store` (else None)."""
    per_shard: dict[int, int] = {}
    count = None
    for rec in store.find(kind=SHARD_KIND, run_id=run_id):
        p = rec.payload
        count = p.get("shard_count")
        k = int(p.get("shard_index", 0))
        per_shard[k] = max(per_shard.get(k, 0), int(p.get("total") or 0))
    if count is None or len(per_shard) < count:
        return None
    return sum(per_shard.values())


def run_status(store: Any, run_id: str) -> str:
    """'complete' when every planned item of every shard is done or finally failed, else 'incomplete'."""
    expected = expected_items(store, run_id)
    finished = sum(1 for it in store.run_items(run_id) if it["status"] in (DONE, FAILED))
    return "complete" if expected is not None and finished >= expected else "incomplete"
