"""The benchmark's units of work and its bookkeeping: shards, cells (one method configuration on one dataset x
models), prepared dataset x classifier pairs, the run summary and the ETA line."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.errors import ConfigError
from .config import DatasetConfig, MethodConfig, ModelRef
from .datasets import BenchmarkDataset
from .judge import Criterion
from .records import DONE, FAILED, cell_id
from .selection import Outcome, Selection


@dataclass(frozen=True)
class Shard:
    index: int  # 0-based
    count: int

    @classmethod
    def parse(cls, text: str | None) -> "Shard":
        """'i/n' with 1 <= i <= n (shard 1 of 4 is '1/4')."""
        if not text:
            return cls(0, 1)
        try:
            i, n = (int(x) for x in str(text).split("/"))
        except ValueError:
            raise ConfigError(f"--shard must look like i/n (e.g. 1/4), not '{text}'.") from None
        if n < 1 or not 1 <= i <= n:
            raise ConfigError(f"--shard {text}: i must be between 1 and n.", hint="Shards are numbered 1/n ... n/n.")
        return cls(i - 1, n)

    def __str__(self) -> str:
        return f"{self.index + 1}/{self.count}"


@dataclass
class Cell:
    dataset: str
    classifier: str
    mllm: str | None
    editor: str | None
    method: MethodConfig

    @property
    def id(self) -> str:
        return cell_id(self.dataset, self.classifier, self.mllm, self.editor, self.method.label)

    def as_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "classifier": self.classifier, "mllm": self.mllm, "editor": self.editor,
                "method": self.method.label, "method_name": self.method.method, "validation": self.method.validation,
                "variant_of": self.method.variant_of, "options": dict(self.method.options)}


@dataclass
class Pair:
    """One dataset x classifier, prepared: its index, selection and this shard's samples."""

    dataset_cfg: DatasetConfig
    classifier_ref: ModelRef
    dataset: BenchmarkDataset
    zero_shot: bool
    index_id: str
    selection: Selection
    selection_key: str
    criterion: Criterion | None
    protocol: str
    assigned: list[Outcome] = field(default_factory=list)
    sample_of: dict[str, Any] = field(default_factory=dict)  # outcome.path -> Sample


@dataclass
class RunSummary:
    run_id: str
    shard: str
    total: int = 0  # items of this shard
    finished_before: int = 0  # done/failed when the run started
    computed: int = 0  # items processed in this call
    statuses: dict[str, int] = field(default_factory=dict)  # final status of every item of this shard
    seconds: float = 0.0
    method_s: float = 0.0  # wall time inside the methods (this call)
    judge_s: float = 0.0  # wall time inside the judges (this call)
    runner_s: float = 0.0  # the rest of the per-item time: the runner's own overhead
    load_s: float = 0.0  # loading models and building methods on first use (not per-item work)
    stage_s: dict[str, float] = field(default_factory=dict)  # method stages, as recorded by the methods
    prepare_s: float = 0.0
    selections: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Ray runs: where each shard ran ("1/2" -> {"node": ip, "gpu_ids": [...], "cuda_visible_devices": ...}).
    placements: dict[str, dict] = field(default_factory=dict)
    cancelled: bool = False

    @property
    def complete(self) -> bool:
        return self.statuses.get(DONE, 0) + self.statuses.get(FAILED, 0) == self.total

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["complete"] = self.complete
        return d


class _Eta:
    """Items per minute and time left, from the items computed in this call only (skips are free)."""

    def __init__(self, total: int, done: int) -> None:
        self.total, self.done, self.computed, self.busy = total, done, 0, 0.0

    def add(self, seconds: float | None) -> None:
        self.done += 1
        if seconds is not None:
            self.computed += 1
            self.busy += seconds

    def text(self) -> str:
        if not self.computed:
            return f"{self.done}/{self.total}"
        per = self.busy / self.computed
        left = max(0, self.total - self.done) * per
        return f"{self.done}/{self.total} · {60.0 / per if per > 0 else 0:.1f} samples/min · ETA {_duration(left)}"


def _duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
