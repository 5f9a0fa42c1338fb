"""Failure modes in words: one sentence per hard cluster with its evidence, shared by the CLI and the report.

A hard cluster "holds up" as a failure mode when it has at least MIN_MODE_SIZE images and its error rate is above
its set's; one that does not is said so plainly, with the figure that sinks it. The sentences named are the ones
the headline method chose (the first of FPDiff, PDiff, SetDiff, TopS that was run: the contrastive methods are the
ones the seed found to name real failures, TopS names what is common in the cluster). When the result was evaluated,
each sentence says whether its images really are harder than the rest (S*_beta). When the method's tau rule left
fewer than K sentences and the rest were padded with TopS's picks, the cluster says so (fallback_text).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .result import FailureModesResult, GroupResult, HardCluster

MIN_MODE_SIZE = 5  # fewer images than this are an anecdote, not a mode
METHOD_LABELS = {"tops": "TopS", "pdiff": "PDiff", "setdiff": "SetDiff", "fpdiff": "FPDiff"}
HEADLINE_ORDER = ("fpdiff", "pdiff", "setdiff", "tops")


def headline_method(methods: Sequence[str]) -> str | None:
    return next((m for m in HEADLINE_ORDER if m in methods), None)


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def error_rate(accuracy: float | None) -> float | None:
    return None if accuracy is None else 1.0 - accuracy


@dataclass
class ModeText:
    group: str
    cluster_id: int
    holds: bool
    sentence: str
    reason: str = ""  # why it does not hold up (empty when it does)


def holds_up(cluster: HardCluster, group: GroupResult) -> tuple[bool, str]:
    if cluster.size < MIN_MODE_SIZE:
        return False, f"only {cluster.size} image{'s' if cluster.size != 1 else ''}, too few to call it a failure mode"
    err, set_err = error_rate(cluster.accuracy), error_rate(group.accuracy)
    if err is None or set_err is None:
        return False, "its error rate is unknown"
    if err <= set_err:
        return False, f"its error rate ({pct(err)}) is not above its set's ({pct(set_err)})"
    return True, ""


def sets_apart(cluster: HardCluster, method: str) -> bool:
    """True unless every chosen sentence is at least as close to the paired easy prototype (d <= 0); without an
    easy cluster there is nothing to contrast with, so True."""
    ds = [p.get("d") for p in cluster.sentences.get(method, [])]
    return any(d is None or d > 0 for d in ds) if ds else True


def confirmed(group: GroupResult) -> set[int] | None:
    """Indices of the sentences whose images are harder than the rest (S*_beta); None when not evaluated."""
    if not group.evaluation:
        return None
    return set(group.evaluation.get("ground_truth", {}).get("hard_sentences", []))


def quoted_sentences(cluster: HardCluster, method: str, star: set[int] | None) -> str:
    parts = []
    for p in cluster.sentences.get(method, []):
        mark = "" if star is None else (" (confirmed)" if p["index"] in star else " (not confirmed)")
        mark += " (TopS padding)" if p.get("padded") else ""
        parts.append(f"\u201c{p['text']}\u201d{mark}")
    return ", ".join(parts) if parts else "no sentence"


def fallback_text(cluster: HardCluster, group: GroupResult, method: str) -> str:
    """Why some of `method`'s picks for this cluster are TopS's: fewer than K sentences passed its tau rule, so the
    rest were taken by similarity to the cluster alone (empty when the method did not fall back)."""
    if not cluster.tau_fallback.get(method):
        return ""
    picks = cluster.sentences.get(method, [])
    padded = cluster.tau_padded.get(method, sum(bool(p.get("padded")) for p in picks))
    own = len(picks) - padded
    tau = f"tau = {group.tau:.3f} ({'automatic' if group.tau_source == 'auto' else 'set'})"
    return (f"{METHOD_LABELS.get(method, method)} fell back: {own} of its {len(picks)} sentences passed {tau}; the "
            f"other {padded} {'is' if padded == 1 else 'are'} TopS's (closest to the cluster, no contrast with the "
            "easy cluster)")


def confusions_text(cluster: HardCluster, top: int = 3) -> str:
    return ", ".join(f"{c['true']} \u2192 {c['pred']} ({c['count']})" for c in cluster.confusions[:top])


def describe_cluster(cluster: HardCluster, group: GroupResult, number: int, methods: Sequence[str]) -> ModeText:
    where = "" if group.class_index is None else f" in class \u201c{group.name}\u201d"
    method = headline_method(methods)
    said = (f"described ({METHOD_LABELS[method]}) as {quoted_sentences(cluster, method, confirmed(group))}"
            if method else "no sentences")
    ok, why = holds_up(cluster, group)
    evidence = (f"{cluster.size} images, error rate {pct(error_rate(cluster.accuracy))} against "
                f"{pct(error_rate(group.accuracy))} over the {group.size} images of its set")
    conf = confusions_text(cluster)
    if ok:
        text = f"Failure mode {number}{where}: {evidence}; {said}."
        if conf:
            text += f" Most frequent confusions: {conf}."
        if method and not sets_apart(cluster, method):
            text += (" No sentence is closer to this cluster than to its nearest easy cluster (d <= 0): the sentence "
                     "set does not say what sets it apart.")
    else:
        text = (f"Hard cluster {number}{where} did not hold up as a failure mode: {why} ({evidence}). "
                f"Its sentences, {said}, do not describe a failure.")
    if method and fallback_text(cluster, group, method):
        text += f" {fallback_text(cluster, group, method)}."
    return ModeText(group.name, cluster.id, ok, text, why)


def describe(result: FailureModesResult) -> list[ModeText]:
    """Every hard cluster of every group, worst first within a group (the result's order)."""
    out = []
    for g in result.groups:
        for i, c in enumerate(g.hard_clusters, 1):
            out.append(describe_cluster(c, g, i, result.methods))
    return out
