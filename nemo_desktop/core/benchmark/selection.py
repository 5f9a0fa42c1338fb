"""Which misclassified images a benchmark run explains (NEMO paper §4.1.1 and appendix B.1).

Per dataset and classifier, N misclassified images (400 in the paper) are drawn without replacement from
the images the classifier gets wrong, with numpy's PCG64 generator seeded from the run's seed and the
(dataset, classifier) pair, so that every pair gets its own reproducible draw and the same config draws the
same images on every machine. Candidates are sorted by sample id first, so the draw does not depend on the
order in which files were listed. The selection records its seed, how the generator was seeded and the
counts. Every other image (the correctly classified ones, and the misclassified ones not drawn) plus the
ImageNet subset stays in the reference database; retrieval only ever returns correctly classified ones.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ..results import Record

DEFAULT_N = 400


@dataclass(frozen=True)
class Outcome:
    """How the classifier did on one benchmark image (from the reference index)."""

    sample_id: str
    path: str
    sha256: str
    label: int
    pred: int
    prob_label: float
    prob_pred: float

    @property
    def correct(self) -> bool:
        return self.pred == self.label


@dataclass
class Selection(Record):
    dataset: str
    classifier: str
    seed: int
    n_requested: int
    n_images: int  # images of the dataset the classifier was run on
    n_misclassified: int
    selected: list[Outcome] = field(default_factory=list)  # in draw order
    generator: str = ""  # how the generator was seeded (reproducibility record)
    notes: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float | None:
        return None if not self.n_images else 1.0 - self.n_misclassified / self.n_images

    def fingerprint(self) -> str:
        """sha256 of the selected (sample id, content hash) pairs in draw order: shards compare it."""
        h = hashlib.sha256()
        for o in self.selected:
            h.update(f"{o.sample_id}\0{o.sha256}\n".encode("utf-8"))
        return h.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The fields (the shared Record form, core/results) and the derived accuracy and fingerprint."""
        return {**super().to_dict(), "accuracy": self.accuracy, "fingerprint": self.fingerprint()}


def derived_seed(seed: int, dataset: str, classifier: str) -> int:
    """A 64-bit seed for one (dataset, classifier) pair from the run's seed."""
    digest = hashlib.sha256(f"nemo-bench-selection\0{int(seed)}\0{dataset}\0{classifier}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def select_misclassified(outcomes: Iterable[Outcome], n: int = DEFAULT_N, *, seed: int = 0, dataset: str = "",
                         classifier: str = "") -> Selection:
    """Draw `n` misclassified outcomes (all of them, with a note, if there are fewer)."""
    if n < 0:
        raise ValueError("n must be >= 0")
    all_outcomes = list(outcomes)
    wrong = sorted((o for o in all_outcomes if not o.correct), key=lambda o: o.sample_id)
    s = derived_seed(seed, dataset, classifier)
    rng = np.random.default_rng(s)
    take = min(n, len(wrong))
    order = rng.permutation(len(wrong))[:take].tolist() if wrong else []
    sel = Selection(dataset, classifier, int(seed), int(n), len(all_outcomes), len(wrong), [wrong[i] for i in order],
                    generator=f"numpy PCG64 default_rng({s}) = sha256('nemo-bench-selection', seed, dataset, "
                              f"classifier)[:8]; permutation of the misclassified images sorted by sample id")
    if take < n:
        sel.notes.append(f"only {len(wrong)} misclassified images (of {len(all_outcomes)}): all are selected, "
                         f"not {n}")
    return sel


def shard_of(position: int, shards: int) -> int:
    """0-based shard of the sample at `position` of a selection (round robin keeps shards balanced)."""
    return position % shards
