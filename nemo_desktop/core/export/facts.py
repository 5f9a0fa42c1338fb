"""What the results store knows about the images of one reference index (a dataset run through a classifier), as
lookups the per-image table reads row by row: competency scores by path, failure modes by path, the newest
explanation by image hash, a fix's held-out predictions by pixel hash.

Each lookup comes from one stored result, the newest that fits (or the one the caller names by key); which ones were
used is recorded (`StoredFacts.sources`) and goes into the table's metadata, so a table says where its facts came
from. Only these lookups are held in memory, never the table's rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.errors import ConfigError

COMPETENCY_KIND = "competency-score"
FAILURE_MODES_KIND = "failure-modes"
EXPLANATION_KIND = "explanation"
FIX_KIND = "fix"


@dataclass
class StoredFacts:
    competency: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # path -> (c, conf, P(ID))
    competency_threshold: float | None = None
    competency_key: str | None = None
    modes: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)  # path -> [(id, sentence, holds)]
    modes_key: str | None = None
    explanations: dict[str, dict[str, Any]] = field(default_factory=dict)  # image sha256 -> newest explanation
    fix: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # pixel sha256 -> (set, before, after)
    fix_key: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def sources(self) -> dict[str, str | None]:
        return {"competency": self.competency_key, "failure_modes": self.modes_key, "fix": self.fix_key,
                "explanations": str(len(self.explanations))}


def _same_model(part: Any, classifier_id: str, revision: str | None) -> bool:
    return isinstance(part, dict) and part.get("id") == classifier_id and part.get("revision") == revision


def _chosen(store, key: str, kind: str, what: str):
    hit = store.get(key)
    if hit is None or hit.kind != kind:
        raise ConfigError(f"No stored {what} result has the key '{key}'.",
                          hint=f"`nemo cache list` shows the stored results; leave the option out to use the newest "
                               f"{what} result of this dataset and classifier.")
    return hit


def competency_facts(store, facts: StoredFacts, classifier_id: str, revision: str | None,
                     key: str | None = None) -> None:
    if key:
        hits = [_chosen(store, key, COMPETENCY_KIND, "competency-score")]
    else:
        hits = [r for r in store.find(kind=COMPETENCY_KIND, limit=200)
                if _same_model((r.payload.get("manifest") or {}).get("classifier"), classifier_id, revision)][:1]
    for r in hits:
        facts.competency = {i["path"]: (float(i["score"]["competency"]), float(i["score"]["confidence"]),
                                        float(i["score"]["id_probability"])) for i in r.payload.get("items", [])}
        facts.competency_threshold = float(r.payload.get("threshold", 0.9))
        facts.competency_key = r.key


def mode_id(result_key: str | None, group_name: str, number: int) -> str:
    return f"{(result_key or 'unstored')[:12]}/{group_name}/{number}"


def failure_mode_facts(store, facts: StoredFacts, index_id: str, key: str | None = None) -> None:
    from ..analyses.failure_modes.members import list_modes
    from ..analyses.failure_modes.result import FailureModesResult

    if key:
        hits = [_chosen(store, key, FAILURE_MODES_KIND, "failure-modes")]
        if (hits[0].payload.get("index") or {}).get("index_id") != index_id:
            raise ConfigError(f"The failure-modes result {key[:12]} ran on another reference index, not {index_id}.",
                              hint="Give a result of this dataset and classifier, or leave the option out.")
    else:
        hits = [r for r in store.find(kind=FAILURE_MODES_KIND)  # newest first
                if (r.payload.get("index") or {}).get("index_id") == index_id][:1]
    for r in hits:
        result = FailureModesResult.from_dict(r.payload)
        result.result_key = r.key
        for mode in list_modes(result):
            entry = (mode_id(r.key, mode.group_name, mode.number), mode.sentence, mode.holds)
            for p in mode.paths:
                facts.modes.setdefault(p, []).append(entry)
        facts.modes_key = r.key


def explanation_facts(store, facts: StoredFacts, classifier_id: str, revision: str | None) -> None:
    """The newest explanation of each image by this classifier (every method), with how many exist."""
    from ..base.records import ExplanationResult

    counts: dict[str, int] = {}
    for r in store.find(kind=EXPLANATION_KIND):  # newest first
        clf = ((r.payload.get("manifest") or {}).get("models") or {}).get("classifier")
        if not _same_model(clf, classifier_id, revision):
            continue
        sha = (r.payload.get("sample") or {}).get("image_sha256")
        if not sha:
            continue
        counts[sha] = counts.get(sha, 0) + 1
        if sha in facts.explanations:
            continue
        res = ExplanationResult.from_dict(r.payload)
        chosen = res.candidates[res.selected_index] if res.selected_index is not None and \
            0 <= res.selected_index < len(res.candidates) else None
        facts.explanations[sha] = {"explanation": res.explanation, "explanation_method": res.method,
                                   "explanation_cei": res.cei,
                                   "explanation_edit_verdict": chosen.edit_verdict if chosen else None,
                                   "explanation_outcome": res.outcome()[0], "explanation_key": r.key}
    for sha, n in counts.items():
        facts.explanations[sha]["explanation_count"] = n


def fix_facts(store, facts: StoredFacts, classifier_id: str, revision: str | None, key: str | None = None) -> None:
    if key:
        hits = [_chosen(store, key, FIX_KIND, "fix")]
        if not hits[0].payload.get("per_image"):
            raise ConfigError(f"The fix {key[:12]} was stored without per-image figures (before they were recorded).",
                              hint="Run the fix again (a re-run with other settings stores them), or leave the "
                                   "option out.")
    else:
        fixes = [r for r in store.find(kind=FIX_KIND) if _same_model(r.payload.get("classifier"), classifier_id,
                                                                     revision)]
        hits = [r for r in fixes if r.payload.get("per_image")][:1]
        if fixes and not hits:
            facts.notes.append(f"{len(fixes)} fix result(s) of this classifier were stored before per-image figures "
                               "were recorded; the fix columns are empty.")
    for r in hits:
        for name, d in r.payload["per_image"].items():
            for sha, b, a in zip(d["sha256"], d["before"], d["after"]):
                facts.fix[sha] = (name, int(b), int(a))
        facts.fix_key = r.key


def gather(store, index, *, competency_key: str | None = None, failure_modes_key: str | None = None,
           fix_key: str | None = None) -> StoredFacts:
    """Every lookup for `index` (a ReferenceIndex)."""
    facts = StoredFacts()
    clf, rev = index.classifier_id, index.classifier_revision
    competency_facts(store, facts, clf, rev, competency_key)
    failure_mode_facts(store, facts, index.index_id, failure_modes_key)
    explanation_facts(store, facts, clf, rev)
    fix_facts(store, facts, clf, rev, fix_key)
    return facts
