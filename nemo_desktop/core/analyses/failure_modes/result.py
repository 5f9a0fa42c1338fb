"""The failure-modes result: JSON-ready dataclasses with a lossless to_dict()/from_dict() round-trip (the
shared result base).

A result holds one group per analysed set (the whole index, or one per class). Rows are row numbers of the
reference index named in `index` (valid for that index fingerprint); member paths of hard clusters are kept
too, so a stored result shows its images without the index. Sentence picks carry their scores: v_h
(similarity to the hard prototype), v_e (to the paired easy prototype) and d = v_h - v_e.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...results import ResultBase

KIND = "dataset"
ANALYSIS = "failure-modes"
VERSION = "1"
STORE_KIND = "failure-modes"


@dataclass
class EasyCluster:
    id: int
    size: int
    accuracy: float | None
    rows: list[int]
    nearest_rows: list[int]  # members closest to the prototype, closest first


@dataclass
class HardCluster:
    id: int
    size: int
    accuracy: float | None
    severity: float | None  # accuracy / the group's accuracy (below 1: worse than the group)
    mean_score: float | None  # mean split score (entropy, P(true class) or correctness) of its members
    rows: list[int]
    paths: list[str]
    nearest_rows: list[int]
    confusions: list[dict[str, Any]]  # top true -> predicted pairs: {"true", "pred", "count"}
    nearest_easy: int | None  # paired easy cluster id (None: no easy cluster)
    easy_similarity: float | None  # cosine between the two prototypes
    sentences: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # method -> [{index, text, v_h, v_e, d}]
    # method -> True when fewer than K sentences passed its tau rule and the rest were padded by v_h (TopS's
    # order); tau_padded says how many picks (the last ones, each marked "padded": true) are that padding.
    tau_fallback: dict[str, bool] = field(default_factory=dict)
    tau_padded: dict[str, int] = field(default_factory=dict)


@dataclass
class GroupResult:
    name: str  # "all" or the class name
    class_index: int | None
    size: int  # images analysed (readable ones)
    accuracy: float | None
    split: dict[str, Any]
    tau: float
    tau_source: str  # "config" | "auto"
    hard_clusters: list[HardCluster]
    easy_clusters: list[EasyCluster]
    retrieved: dict[str, list[int]]  # method -> R_S (sentence indices)
    clustering: dict[str, Any] = field(default_factory=dict)  # subsample facts per set
    sentences: list[str] | None = None  # only when '{class}' made this group's texts differ from the set's
    evaluation: dict[str, Any] | None = None  # {"ground_truth": ..., "methods": {method: scores}}
    notes: list[str] = field(default_factory=list)


@dataclass
class FailureModesResult(ResultBase):
    config: dict[str, Any]
    index: dict[str, Any]  # index_id, fingerprint, dataset_root, classifier_id, classifier_revision, rows
    sentences: list[dict[str, Any]]  # the set (texts before '{class}' filling), with source and category
    groups: list[GroupResult]
    evaluation: dict[str, Any] | None  # macro averages over groups, per method (when evaluated)
    manifest: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    result_key: str | None = None
    excluded: int = 0  # index images left out because they could not be read
    # Sentences checked with CEI after the analysis (validate.validate_modes; each check is stored under its own
    # key): {"settings": {...}, "validations": [ModeValidation dicts], "notes": [...]}; None when not validated.
    cei_validation: dict[str, Any] | None = None
    # P@K of the clusters (App. B), macro over the groups where it is defined: {"k", "value", "n"}; None when not
    # evaluated. Per group it is in GroupResult.evaluation["p_at_k"].
    p_at_k: dict[str, Any] | None = None
    kind: str = KIND
    analysis: str = ANALYSIS
    version: str = VERSION

    @property
    def methods(self) -> list[str]:
        return list(self.config.get("methods", []))
