"""The CEI values of a stored run (a benchmark or batch run), per method, for the app's histogram.

The binning is the run report's (`core.reports.runs.cei_histogram`), so the app and the HTML/PDF report draw
the same bins for the same run. Items without a usable CEI are counted, not dropped silently: the chart says
how many images it shows and how many it could not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.job_context import JobContext, null_context
from nemo_desktop.core.reports.document import Histogram
from nemo_desktop.core.reports.runs import cei_histogram
from nemo_desktop.core.reports.sections.sample import explanation_from_payload


@dataclass
class RunCEI:
    run_id: str
    items: int  # items the run holds
    values: dict[str, list[float]] = field(default_factory=dict)  # method label -> finite CEI values
    without_cei: int = 0  # results with no CEI (no candidate was scored) or a non-finite one
    failed: int = 0  # items that failed, or whose result is missing or unreadable
    skipped: int = 0  # items skipped by design (e.g. correctly classified images in a batch run)

    @property
    def n(self) -> int:
        return sum(len(v) for v in self.values.values())

    def histogram(self) -> Histogram | None:
        return cei_histogram(self.values)


def run_cei(store, run_id: str, ctx: JobContext | None = None) -> RunCEI:
    ctx = ctx or null_context()
    if store.get_run(run_id) is None:
        raise ConfigError(f"No run has the id {run_id!r}.", hint="List runs with `nemo cache info`.")
    items = store.run_items(run_id)
    out = RunCEI(run_id, len(items))
    for i, it in enumerate(items):
        ctx.check_cancelled()
        ctx.progress("Reading results", i, len(items))
        if it.get("status") == "skipped" and not it.get("result_key"):
            out.skipped += 1
            continue
        stored = store.get(it["result_key"]) if it.get("result_key") and not it.get("error") else None
        if stored is None:
            out.failed += 1
            continue
        try:
            result = explanation_from_payload(stored.payload, stored.key)
        except ConfigError:
            out.failed += 1
            continue
        label = stored.payload.get("method")  # the benchmark's method label (e.g. a variant), as in the report
        method = label if isinstance(label, str) and label else result.method
        if result.cei is None or not math.isfinite(result.cei):
            out.without_cei += 1
        else:
            out.values.setdefault(method, []).append(float(result.cei))
    return out
