"""Before/after figures of a fix on held-out data, with paired bootstrap confidence intervals and n.

Both models see the same images, so the change in accuracy is measured per image (correct after - correct
before) and its interval comes from resampling images, not from two independent intervals. The guard compares
the change on everything else (the `rest`) with a margin in points: a fix that costs more than the margin there,
overall or on a class whose drop is beyond the margin with an interval that excludes zero, is rejected however
much it helps the finding's images. A fix must also gain on the finding's images: an interval above zero AND at
least a minimum gain in points, since extra training steps alone (the unchanged-images and wrong-explanation
controls of benchmarks/fix_loop.py) can gain a few points there with an interval that excludes zero.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np


def paired(before: np.ndarray, after: np.ndarray, *, resamples: int, seed: int) -> dict[str, Any]:
    """Accuracy before and after (fractions) and the change in points with its 95% paired bootstrap interval; and
    the images behind the change: `gained` (wrong before, right after) and `lost` (right before, wrong after), the
    only ones whose paired difference is not zero."""
    b = np.asarray(before, dtype=np.float64)
    a = np.asarray(after, dtype=np.float64)
    n = len(b)
    if n == 0:
        return {"n": 0, "before": None, "after": None, "change": None, "ci": None,
                "before_ci": None, "after_ci": None, "gained": 0, "lost": 0}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    diff = (a[idx] - b[idx]).mean(axis=1) * 100
    bs, as_ = b[idx].mean(axis=1) * 100, a[idx].mean(axis=1) * 100
    q = (2.5, 97.5)
    return {"n": n, "before": float(b.mean()), "after": float(a.mean()), "change": float((a.mean() - b.mean()) * 100),
            "ci": [float(v) for v in np.percentile(diff, q)],
            "before_ci": [float(v) for v in np.percentile(bs, q)],
            "after_ci": [float(v) for v in np.percentile(as_, q)],
            "gained": int(((a > 0) & (b == 0)).sum()), "lost": int(((a == 0) & (b > 0)).sum())}


def per_class(labels: np.ndarray, before: np.ndarray, after: np.ndarray, names: Sequence[str], *,
              resamples: int, seed: int) -> dict[str, dict[str, Any]]:
    out = {}
    for c in sorted(set(int(v) for v in labels)):
        m = labels == c
        out[names[c]] = paired(before[m], after[m], resamples=resamples, seed=seed + c)
    return out


def confusions_moved(labels: np.ndarray, pred_before: np.ndarray, pred_after: np.ndarray, names: Sequence[str],
                     top: int = 10) -> list[dict[str, Any]]:
    """The (true -> predicted) errors whose counts changed most, with both counts."""
    def count(pred: np.ndarray) -> Counter:
        return Counter((int(t), int(p)) for t, p in zip(labels, pred) if t != p)

    cb, ca = count(pred_before), count(pred_after)
    moved = [(k, cb.get(k, 0), ca.get(k, 0)) for k in set(cb) | set(ca)]
    moved.sort(key=lambda r: (-abs(r[2] - r[1]), r[0]))
    return [{"true": names[t], "pred": names[p], "before": b, "after": a} for (t, p), b, a in moved[:top]
            if a != b]


def measure_set(labels: np.ndarray, pred_before: np.ndarray, pred_after: np.ndarray, names: Sequence[str], *,
                resamples: int, seed: int) -> dict[str, Any]:
    before, after = pred_before == labels, pred_after == labels
    return {"overall": paired(before, after, resamples=resamples, seed=seed),
            "per_class": per_class(labels, before, after, names, resamples=resamples, seed=seed + 1000),
            "confusions": confusions_moved(labels, pred_before, pred_after, names)}


def guard(affected: dict[str, Any], rest: dict[str, Any], margin: float, min_gain: float = 0.0) -> dict[str, Any]:
    """The verdict: keep (the finding's images gain at least `min_gain` points with an interval above zero, nothing
    else drops beyond the margin) or why not. `decided_by` names the threshold that decided: "margin" (a
    regression), "interval" (the gain's interval reaches zero), "min_gain" (a clear gain, but below the minimum),
    or, for a kept fix, all three (each was passed)."""
    o = rest["overall"]
    regressions = []
    if o["change"] is not None and o["change"] < -margin:
        regressions.append({"set": "everything else", "change": o["change"], "ci": o["ci"], "n": o["n"]})
    for name, c in rest["per_class"].items():
        if c["change"] is not None and c["change"] < -margin and c["ci"][1] < 0:
            regressions.append({"set": f"class {name}", "change": c["change"], "ci": c["ci"], "n": c["n"]})
    a = affected["overall"]
    clear = a["change"] is not None and a["ci"][0] > 0
    gain = (f"{a['change']:+.1f} points (95% CI {a['ci'][0]:+.1f} to {a['ci'][1]:+.1f}, n={a['n']})"
            if a["change"] is not None else "not measured (no images)")
    if regressions:
        verdict, decided_by = "reject-regression", ["margin"]
        why = "; ".join(f"{r['set']} {r['change']:+.1f} points (95% CI {r['ci'][0]:+.1f} to {r['ci'][1]:+.1f}, "
                        f"n={r['n']})" for r in regressions) + f", beyond the {margin:g}-point margin"
    elif not clear:
        verdict, decided_by = "reject-no-gain", ["interval"]
        why = f"the finding's images changed by {gain}: no clear gain (the interval reaches zero)"
    elif a["change"] < min_gain:
        verdict, decided_by = "reject-small-gain", ["min_gain"]
        why = (f"the finding's images gained {gain}, below the {min_gain:g}-point minimum gain (what the same "
               f"training without the right targeted data can gain)")
    else:
        verdict, decided_by = "keep", ["interval", "min_gain", "margin"]
        why = (f"the finding's images gained {gain}, at least the {min_gain:g}-point minimum gain; everything else "
               f"changed by {o['change']:+.1f} points (n={o['n']}), within the {margin:g}-point margin")
    return {"verdict": verdict, "keep": verdict == "keep", "margin": margin, "min_gain": min_gain,
            "decided_by": decided_by, "why": why, "regressions": regressions}
