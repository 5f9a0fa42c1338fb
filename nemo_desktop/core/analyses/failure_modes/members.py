"""Acting on a finding: which images belong to a failure mode, for the dataset browser's grid and the workbench.

    modes = list_modes(result)                      # every hard cluster, numbered as the report numbers them
    members = mode_members(result, modes[0], index) # its images with what the classifier said (the index's rows)
    errors = [m for m in members if not m.correct]  # the ones to explain

Images are matched to the index by path, not by the stored row numbers: rows are only valid for the index
fingerprint the analysis saw, and an index grows when new images are indexed. A member the index no longer holds
is counted in `missing`, not guessed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...base.errors import ConfigError
from .describe import describe_cluster, headline_method
from .result import FailureModesResult


@dataclass(frozen=True)
class ModeRef:
    """One hard cluster of a result, as the user picks it ("failure mode 2 of result 3fa1…")."""

    result_key: str | None
    index_id: str | None
    dataset_root: str | None
    group: int  # position of the group in result.groups
    group_name: str  # "all" or the class name
    cluster: int  # position of the cluster in its group's hard_clusters (0-based)
    number: int  # the report's number (1-based, within the group)
    holds: bool  # holds up as a failure mode (describe.holds_up)
    sentence: str  # the report's sentence for it, with its evidence
    paths: tuple[str, ...]  # every member's path
    best: str = ""  # the headline method's first sentence for it: what ranking and CEI check unless one is typed

    @property
    def title(self) -> str:
        where = "" if self.group_name == "all" else f" in class \u201c{self.group_name}\u201d"
        what = "Failure mode" if self.holds else "Hard cluster"
        return f"{what} {self.number}{where} of result {(self.result_key or 'not stored')[:12]}"

    @property
    def short(self) -> str:
        """A line for a picker: the title, its size and whether it held up."""
        return f"{self.title}: {len(self.paths)} images" + ("" if self.holds else " (did not hold up)")


@dataclass(frozen=True)
class ModeMember:
    path: str
    true_name: str
    pred_name: str | None
    confidence: float | None  # P(prediction)
    correct: bool


def list_modes(result: FailureModesResult) -> list[ModeRef]:
    """Every hard cluster of every group, in the result's (and the report's) order."""
    out, method = [], headline_method(result.methods)
    for gi, g in enumerate(result.groups):
        for ci, c in enumerate(g.hard_clusters):
            text = describe_cluster(c, g, ci + 1, result.methods)
            picks = c.sentences.get(method, []) if method else []
            out.append(ModeRef(result.result_key, result.index.get("index_id"), result.index.get("dataset_root"),
                               gi, g.name, ci, ci + 1, text.holds, text.sentence, tuple(str(p) for p in c.paths),
                               picks[0]["text"] if picks else ""))
    return out


def mode_members(mode: ModeRef, index: Any) -> tuple[list[ModeMember], int]:
    """The mode's images as the index `index` sees them (same order as the cluster), and how many of its paths the
    index no longer holds."""
    if mode.index_id is not None and index.index_id != mode.index_id:
        raise ConfigError(f"The failure mode comes from index {mode.index_id}, not {index.index_id}.",
                          hint="Open the index the analysis ran on.")
    e = index.entries
    row_of = {str(p): i for i, p in enumerate(e.paths)}
    names = list(index.class_names)
    out, missing = [], 0
    for path in mode.paths:
        r = row_of.get(path)
        if r is None:
            missing += 1
            continue
        y, p = int(e.labels[r]), int(e.preds[r])
        conf = float(e.prob_pred[r])
        out.append(ModeMember(path, _name(names, y), _name(names, p) if p >= 0 else None,
                              None if np.isnan(conf) else conf, bool(e.correct[r])))
    return out, missing


def member_mask(paths: Sequence[str] | np.ndarray, mode: ModeRef) -> np.ndarray:
    """Which of `paths` (e.g. the dataset browser's rows) belong to the mode (bool array, same length)."""
    members = set(mode.paths)
    return np.fromiter((str(p) in members for p in paths), bool, len(paths))


def _name(names: list[str], i: int) -> str:
    return names[i] if 0 <= i < len(names) else str(i)
