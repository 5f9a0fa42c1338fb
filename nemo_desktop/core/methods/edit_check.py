"""Flag counterfactuals whose edit changed the whole image, and the rule that selects among candidates.

CEI rewards any edit that raises P(true): an editor that returns colour noise can score +95 and, under the
paper's plain CEI argmax, be "the explanation". Each image counterfactual carries its distance from the original
(`Candidate.edit_distance`, metrics/edit_distance.py); a distance at or above `edit_flag_threshold` flags it.
Flagged candidates are kept and shown with their flag, never dropped. The selection rule:

* "prefer-unflagged" (default): the largest CEI among unflagged candidates; only when every tested candidate is
  flagged, the largest CEI among them, with a note saying so;
* "cei": the paper's rule (Algorithm 1 stage 4), the largest CEI whatever the distance; a flagged selection gets
  a note.

Both settings are fields of the method configs (so they are in every result key and manifest).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..errors import ConfigError
from .result import Candidate

SELECTION_RULES = ("prefer-unflagged", "cei")
DEFAULT_FLAG_THRESHOLD = 0.6

EDIT_CHECK_FIELD_INFO: dict[str, dict] = {
    "edit_flag_threshold": {"label": "Whole-image flag", "min": 0.0, "max": 1.0,
                            "help": "flag a counterfactual whose distance from the original (LPIPS, or 1 - SSIM "
                                    "without LPIPS weights; 0 = identical, 1 = unrelated) is at least this"},
    "selection": {"label": "Selection rule", "choices": SELECTION_RULES,
                  "help": "prefer-unflagged: largest CEI among edits that kept the image; cei: the paper's "
                          "plain CEI argmax"},
}


def check_edit_check(threshold: float, selection: str) -> None:
    if not (0.0 <= float(threshold) <= 1.0) or math.isnan(float(threshold)):
        raise ConfigError(f"The whole-image flag threshold must lie in [0, 1] (got {threshold}).",
                          hint="0 = identical images, 1 = unrelated; the default is "
                               f"{DEFAULT_FLAG_THRESHOLD}.")
    if selection not in SELECTION_RULES:
        raise ConfigError(f"Unknown selection rule '{selection}'.", hint=f"Use one of: {', '.join(SELECTION_RULES)}.")


def flag_whole_image_edits(candidates: Sequence[Candidate], threshold: float) -> list[int]:
    """Set `edit_flagged` on every candidate whose edit distance is >= threshold; their indices."""
    flagged = []
    for j, c in enumerate(candidates):
        c.edit_flagged = c.edit_distance is not None and c.edit_distance >= threshold
        if c.edit_flagged:
            flagged.append(j)
    return flagged


def _argmax(candidates: Sequence[Candidate], allowed) -> int | None:
    best, best_score = None, -math.inf
    for j, c in enumerate(candidates):
        if allowed(c) and c.cei is not None and c.error is None and c.cei > best_score:
            best, best_score = j, c.cei
    return best


def distance_text(c: Candidate) -> str:
    return f"{c.edit_distance_metric or 'distance'} {c.edit_distance:.2f}" if c.edit_distance is not None else "—"


def select(candidates: Sequence[Candidate], selection: str, threshold: float, notes: list[str] | None,
           noun: str) -> int | None:
    """Flag whole-image edits, then select by `selection` (see the module docstring), adding notes."""
    flag_whole_image_edits(candidates, threshold)
    best_any = _argmax(candidates, lambda c: True)
    best = best_any
    if selection == "prefer-unflagged" and best_any is not None and candidates[best_any].edit_flagged:
        unflagged = _argmax(candidates, lambda c: not c.edit_flagged)
        c = candidates[best_any]
        if unflagged is not None:
            best = unflagged
            if notes is not None:
                notes.append(f"{noun.capitalize()} #{best_any + 1} had the largest CEI ({c.cei:+.1f}) but its edit "
                             f"changed the whole image ({distance_text(c)} >= {threshold:.2f}); it is flagged and "
                             f"#{best + 1}, the best {noun} whose edit kept the image, is selected.")
        elif notes is not None:
            notes.append(f"Every tested {noun}'s edit changed the whole image (distance >= {threshold:.2f}); the "
                         f"selected one is flagged and its CEI may not reflect its {noun}.")
    elif best is not None and candidates[best].edit_flagged and notes is not None:
        notes.append(f"The selected {noun}'s edit changed the whole image ({distance_text(candidates[best])} >= "
                     f"{threshold:.2f}); its CEI may come from the destruction, not from the {noun}.")
    return best


def edit_check_record(candidates: Sequence[Candidate], threshold: float, selection: str) -> dict[str, Any]:
    """The manifest's record of the check: settings, the measure(s) used and what was flagged."""
    metrics = sorted({c.edit_distance_metric for c in candidates if c.edit_distance_metric})
    return {"flag_threshold": threshold, "selection": selection, "metric": metrics[0] if len(metrics) == 1 else
            (metrics or None), "flagged": [j for j, c in enumerate(candidates) if c.edit_flagged],
            "distances": [c.edit_distance for c in candidates]}
