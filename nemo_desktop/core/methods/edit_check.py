"""Judge each counterfactual edit, and the rule that selects among candidates by the evidence they carry.

CEI rewards any edit that raises P(true): an editor that returns colour noise can score +95. Each image
counterfactual therefore carries two measures of what the edit did:

* its distance from the original (`edit_distance`, metrics/edit_distance.py: LPIPS or 1 − SSIM);
* the share of its structure that the original had (`edit_structure`, metrics/edit_structure.py), which is
  indifferent to polarity, colour, style and a rotation or rescaling of the whole.

The verdict (`Candidate.edit_verdict`) combines them: "no change" (distance ~0: the editor did nothing),
"destroyed" (structure below `STRUCTURE_KEPT`: noise, or a new picture), "global" (distance at or above
`edit_flag_threshold`, structure kept: a background, a style or a colour changed over the whole image) or
"local". A distance alone cannot separate "global" from "destroyed": in the known-cause worlds
(benchmarks/known_causes.py) inverting a digit's background scores 1 − SSIM 1.00, exactly as noise does,
while its structure share is 0.95-1.00 against noise's 0.0-0.34 (28 and 224 px). `edit_flagged` marks every
verdict but "local", so the user sees what a selected candidate's edit did. `edit_verdict_reason` says in words
which test decided the verdict (the structure reading and its figure, the distance; issue 45), for the result,
the manifest's record (`decided_by`), the report, `nemo explain` and the app.

The selection rules (a field of every method config, so in every result key and manifest):

* "evidence" (default): the largest CEI among candidates whose edit is a valid counterfactual (not "destroyed",
  not "no change"); a whole-image change is valid, since a global property (a background, a rendition style)
  is exactly the kind of cause the NEMO benchmark's datasets plant. When the best valid candidate's CEI is
  within the noise floor (`cei_noise_floor` points) while an invalid edit raised P(true) beyond it, nothing is
  selected: a hypothesis with no evidence must not stand in for one whose test failed, and the strong effect
  came from an edit that does not test its hypothesis. The floor applies to every selection by this rule, also
  when the best valid candidate is the best overall: a CEI at or below the floor (inclusive: exactly at the
  floor is within it) is no evidence, and nothing is selected (issue 45). When every tested edit is invalid,
  nothing is selected either. Ties in CEI go to the first candidate in order; a valid edit wins a tie with an
  invalid one. Why: with the earlier default ("prefer-unflagged", a flag from the distance alone) SciTX preferred a
  rotation hypothesis with CEI 7e-10 to the true background cause with CEI +97.6; in the worlds the evidence
  rule recovers the planted cause and never selects noise (docs/benchmarks/edit_evidence.md gives the figures).
* "prefer-unflagged": the earlier default, kept for stored settings: the largest CEI among edits below the
  distance threshold.
* "cei": the paper's rule (Algorithm 1 stage 4), the largest CEI whatever the edit did; the shipped table
  configs use it. A flagged selection gets a note.

With the reference control (edit_control.py; SciTX's image edits under the "evidence" rule) the verdict on
validity is the control's where it ran: the same edit on references of other classes must not raise the true
class as it did on the query. A passing control overrules "destroyed" (a cue removed from a flat photograph
leaves no structure to measure), a failing one overrules "local"/"global" (a replacement by the true class keeps
the layout); "no change" stays invalid; where the control did not run the structure verdict stands, and the
reason says so (`_by_evidence_with_control`). The other callers of `select` pass no control: as before.
SciTX's optional semantic check by the MLLM (edit_semantic.py, `edit_semantic_check`) runs after them on an edit
they accept and can only veto it; its words then lead the reason.

A selected candidate whose edit is flagged gets a note naming the runner-up and why the selected one won;
the manifest's `edit_check` record keeps the same (`runner_up`, `reason`).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..base.errors import ConfigError
from ..metrics.edit_distance import describe
from ..base.records import Candidate

SELECTION_RULES = ("evidence", "prefer-unflagged", "cei")
DEFAULT_SELECTION = "evidence"
DEFAULT_FLAG_THRESHOLD = 0.6
# Points of CEI an edit that names nothing relevant moves P(true) by: the editor's round trip alone moved it by
# up to 4.8 points in the known-cause worlds (and by -4.7..+1.8 in the failure-mode digits world).
DEFAULT_NOISE_FLOOR = 5.0
STRUCTURE_KEPT = 0.8  # structure share below this: the edit destroyed or replaced the picture
NO_CHANGE = 1e-3  # a distance at or below this: the edit did nothing
INVALID = ("destroyed", "no change")

EDIT_CHECK_FIELD_INFO: dict[str, dict] = {
    "edit_flag_threshold": {"label": "Whole-image flag", "min": 0.0, "max": 1.0,
                            "help": "flag a counterfactual whose distance from the original (LPIPS, or 1 - SSIM "
                                    "without LPIPS weights; 0 = identical, 1 = unrelated) is at least this"},
    "selection": {"label": "Selection rule", "choices": SELECTION_RULES,
                  "help": "evidence: largest CEI among edits that kept the picture's structure (global changes "
                          "count); prefer-unflagged: largest CEI among edits below the flag distance; cei: the "
                          "paper's plain CEI argmax"},
    "cei_noise_floor": {"label": "CEI noise floor", "min": 0.0, "max": 100.0,
                        "help": "points of CEI that an irrelevant edit can reach; with the evidence rule a "
                                "candidate must raise P(true) by more than this to be selected"},
}


def check_edit_check(threshold: float, selection: str, noise_floor: float = DEFAULT_NOISE_FLOOR) -> None:
    if not (0.0 <= float(threshold) <= 1.0) or math.isnan(float(threshold)):
        raise ConfigError(f"The whole-image flag threshold must lie in [0, 1] (got {threshold}).",
                          hint="0 = identical images, 1 = unrelated; the default is "
                               f"{DEFAULT_FLAG_THRESHOLD}.")
    if selection not in SELECTION_RULES:
        raise ConfigError(f"Unknown selection rule '{selection}'.", hint=f"Use one of: {', '.join(SELECTION_RULES)}.")
    if not (0.0 <= float(noise_floor) <= 100.0) or math.isnan(float(noise_floor)):
        raise ConfigError(f"The CEI noise floor must lie in [0, 100] points (got {noise_floor}).",
                          hint=f"The default is {DEFAULT_NOISE_FLOOR}.")


def verdict(c: Candidate, threshold: float) -> str | None:
    """"local" | "global" | "destroyed" | "no change" for an image counterfactual; None when not measured."""
    if c.edit_distance is None:
        return None
    if c.edit_distance <= NO_CHANGE:
        return "no change"
    if c.edit_structure is not None and c.edit_structure < STRUCTURE_KEPT:
        return "destroyed"
    return "global" if c.edit_distance >= threshold else "local"


def verdict_reason(c: Candidate, threshold: float) -> str | None:
    """Which test decided the verdict, in words: "structure test (share of the edit's edges that lie on the
    original's): 0.30, below 0.80 -> destroyed"."""
    from ..metrics.edit_structure import READINGS

    v = c.edit_verdict
    if v is None or c.edit_distance is None:
        return None
    metric = c.edit_distance_metric or "distance"
    if v == "no change":
        return f"distance test: {metric} {c.edit_distance:.4f}, at most {NO_CHANGE:g} -> no change"
    if c.edit_structure is None:
        structure = "structure not measured"
    else:
        how = READINGS.get(c.edit_structure_reading or "", None)
        structure = (f"structure test ({how}): {c.edit_structure:.2f}" if how else
                     f"structure test: {c.edit_structure:.2f}")
    if v == "destroyed":
        return f"{structure}, below {STRUCTURE_KEPT:.2f} -> destroyed or replaced"
    kept = structure if c.edit_structure is None else f"{structure}, at least {STRUCTURE_KEPT:.2f} -> kept"
    if v == "global":
        return f"{kept}; distance test: {metric} {c.edit_distance:.2f}, at least {threshold:.2f} -> whole image"
    return f"{kept}; distance test: {metric} {c.edit_distance:.2f}, below {threshold:.2f} -> local"


def judge_edits(candidates: Sequence[Candidate], threshold: float) -> list[int]:
    """Set `edit_verdict`, `edit_verdict_reason` and `edit_flagged` (any verdict but "local") on every candidate;
    the flagged indices."""
    flagged = []
    for j, c in enumerate(candidates):
        c.edit_verdict = verdict(c, threshold)
        c.edit_verdict_reason = verdict_reason(c, threshold)
        c.edit_flagged = c.edit_verdict not in (None, "local")
        if c.edit_flagged:
            flagged.append(j)
    return flagged



def _tested(c: Candidate) -> bool:
    return c.cei is not None and c.error is None


def _argmax(candidates: Sequence[Candidate], allowed) -> int | None:
    best, best_score = None, -math.inf
    for j, c in enumerate(candidates):
        if allowed(c) and _tested(c) and c.cei > best_score:
            best, best_score = j, c.cei
    return best


def describe_edit(c: Candidate) -> str:
    """"1-ssim 0.97, structure 0.98, whole image changed, structure kept" for notes (the words of the candidate
    lines in the GUI, `nemo explain` and reports, without the "(flagged)" those add)."""
    if c.edit_distance is None:
        return "not measured"
    return describe(c.edit_distance, c.edit_distance_metric, structure=c.edit_structure, verdict=c.edit_verdict)


def _runner_up(candidates: Sequence[Candidate], best: int) -> int | None:
    return _argmax(candidates, lambda c: c is not candidates[best])


def select(candidates: Sequence[Candidate], selection: str, threshold: float, notes: list[str] | None,
           noun: str, noise_floor: float = DEFAULT_NOISE_FLOOR, control: Any = None,
           semantic: Any = None) -> int | None:
    """Judge the edits, then select by `selection` (see the module docstring), adding notes. `control`: the
    reference control (edit_control.ReferenceControl) for the evidence rule, or None where the caller has none
    (the structure verdict alone decides, as before). `semantic`: the MLLM's semantic check
    (edit_semantic.SemanticCheck), used with the control only; None = not asked."""
    judge_edits(candidates, threshold)
    say = notes.append if notes is not None else (lambda _text: None)
    best_any = _argmax(candidates, lambda c: True)
    if selection == "cei":
        best = best_any
    elif selection == "prefer-unflagged":
        best = _prefer_unflagged(candidates, best_any, threshold, say, noun)
    elif control is not None:
        best = _by_evidence_with_control(candidates, best_any, noise_floor, control, say, noun, semantic)
    else:
        best = _by_evidence(candidates, best_any, noise_floor, say, noun)
    if best is not None and candidates[best].edit_flagged:
        say(_why_flagged_won(candidates, best, noun))
    return best


def control_valid(c: Candidate) -> bool:
    """A valid test of its hypothesis: the reference control passed, or (where it did not run) the structure
    verdict is neither "destroyed" nor "no change". A failed control invalidates any structure verdict."""
    ctl = c.edit_control or {}
    if c.edit_verdict == "no change":
        return False
    if ctl.get("ran"):
        return bool(ctl.get("passed"))
    return c.edit_verdict not in INVALID


def _by_evidence_with_control(candidates, best_any, floor, control, say, noun, semantic=None) -> int | None:
    """The evidence rule with the reference control (edit_control.py), run lazily from the largest CEI down, only
    for candidates beyond the noise floor, until one is valid. Which test decides:

    * distance "no change" -> invalid (the control is not run: the edit did nothing);
    * the control ran -> it decides, whatever the structure said: a pass overrules "destroyed" (removing a cue
      from a flat patch leaves no structure to measure), a failure overrules "local"/"global" (the edit raises
      the true class on references of other classes too);
    * the control did not run (off, no reference of another class, an edit of a reference failed) ->
      the structure verdict stands, and the reason says the control did not run;
    * then, where given, the MLLM's semantic check (edit_semantic.py) of an edit the above accept: it can only
      veto it (`semantic.passes`), and the next candidate is tried.
    Candidates not reached (CEI within the floor, or below the selected one) keep the structure verdict and say
    why the control did not run for them."""
    from .edit_control import describe_control

    order = sorted((j for j, c in enumerate(candidates) if _tested(c)), key=lambda j: (-candidates[j].cei, j))
    chosen, failed = None, []
    for j in order:
        c = candidates[j]
        if chosen is not None:
            _not_run(c, control, f"a {noun} with a larger CEI was selected")
            continue
        if not beyond_floor(c.cei, floor):
            _not_run(c, control, f"CEI {c.cei:+.1f} within the noise floor of {floor:g}")
            continue
        if c.edit_verdict == "no change":
            _not_run(c, control, "the edit changed nothing")
            continue
        if c.intervention_kind not in (None, "image") or c.edit_distance is None:
            _not_run(c, control, "not an image edit")
        else:
            reading = control(j, c)
            c.edit_control = reading.as_dict()
            c.edit_verdict_reason = with_control(c, describe_control(reading, floor))
        if control_valid(c) and (semantic is None or semantic.passes(j, c)):
            chosen = j
        elif (c.edit_control or {}).get("ran"):
            failed.append(j)
    for c in candidates:
        if c.edit_control is None and c.edit_verdict is not None:
            _not_run(c, control, "not tested" if c.cei is None else "not reached")
    if chosen is not None:
        c = candidates[chosen]
        strong = candidates[best_any] if best_any is not None else c
        if best_any is not None and best_any != chosen and not (strong.edit_control or {}).get("ran") \
                and strong.edit_verdict in INVALID:
            # the strongest edit was ruled out by the structure test (the control did not run on it): as without
            # a control, the user is told why it lost
            say(f"{noun.capitalize()} #{best_any + 1} had the largest CEI ({strong.cei:+.1f}) but its edit does not "
                f"test it ({describe_edit(strong)}); #{chosen + 1} is selected.")
        if failed:
            f = candidates[failed[0]]
            say(f"{noun.capitalize()} #{failed[0] + 1} had a larger CEI ({f.cei:+.1f}) but the same edit raised "
                f"P(true) on references of other classes by {_control_rise(f)}: it does not test its {noun}; "
                f"#{chosen + 1} is selected.")
        if c.edit_verdict == "destroyed":
            say(f"The structure test read {noun} #{chosen + 1}'s edit as destroyed ({describe_edit(c)}), but the "
                "reference control shows its effect is specific to this image; the control decides.")
        return chosen
    if best_any is None:
        return None
    strong = candidates[best_any]
    if failed:
        f = candidates[failed[0]]
        say(f"{noun.capitalize()} #{failed[0] + 1} raised P(true) by {f.cei:+.1f} points, but the same edit raised it "
            f"by {_control_rise(f)} on references of other classes: it does not test "
            f"its {noun}, and no other {noun} beyond the noise floor of {floor:g} points passed; no {noun} is "
            "validated.")
    elif beyond_floor(strong.cei, floor):
        say(f"{noun.capitalize()} #{best_any + 1} raised P(true) by {strong.cei:+.1f} points, but its edit does not "
            f"test it ({describe_edit(strong)}); no {noun} is validated.")
    else:
        say(f"The best tested {noun} (#{best_any + 1}) moved P(true) by {strong.cei:+.1f} points, not beyond the "
            f"noise floor of {floor:g} points that an edit naming nothing relevant reaches; no {noun} is validated.")
    return None


def _control_rise(c: Candidate) -> str:
    """How much the control saw the true class rise on the references: points, and log-odds where read (a rule
    that reads log-odds can fail an edit whose rise in points is within the floor)."""
    ctl = c.edit_control or {}
    words = f"{ctl['control_effect']:+.1f} points"
    if ctl.get("control_logit_effect") is not None and ctl.get("rule") not in (None, "points"):
        words += f" ({ctl['control_logit_effect']:+.2f} nats in log-odds)"
    return words


def _not_run(c: Candidate, control, why: str) -> None:
    from .edit_control import describe_control

    reading = control.not_run(why if control.available else control.why_off)
    c.edit_control = reading.as_dict()
    if c.edit_verdict_reason is not None:
        c.edit_verdict_reason = with_control(c, describe_control(reading, 0.0))


def with_control(c: Candidate, words: str) -> str:
    """The verdict reason with the control first when it decided, after the structure's words otherwise."""
    ctl = c.edit_control or {}
    structure = c.edit_verdict_reason or "structure not measured"
    if not ctl.get("ran"):
        return f"{structure}; {words}"
    if ctl.get("passed") and c.edit_verdict == "destroyed":
        return f"{words}, overruling the {structure}"
    if not ctl.get("passed") and c.edit_verdict not in INVALID:
        return f"{words}, overruling the {structure}"
    return f"{words}; {structure}"


def _by_evidence(candidates, best_any, floor, say, noun) -> int | None:
    valid = _argmax(candidates, lambda c: c.edit_verdict not in INVALID)
    if best_any is None:
        return None
    strong = candidates[best_any]
    if valid is None:
        say(f"Every tested {noun}'s edit destroyed the picture or changed nothing (best CEI {strong.cei:+.1f}, "
            f"#{best_any + 1}: {describe_edit(strong)}); no {noun} is validated.")
        return None
    c = candidates[valid]
    if not beyond_floor(c.cei, floor):  # no explanation without evidence, whichever candidate was strongest
        if valid != best_any and beyond_floor(strong.cei, floor):
            say(f"{noun.capitalize()} #{best_any + 1} raised P(true) by {strong.cei:+.1f} points, but its edit "
                f"does not test it ({describe_edit(strong)}); no edit that kept the picture raised P(true) beyond "
                f"the noise floor of {floor:g} points (best #{valid + 1}, CEI {c.cei:+.1f}), so no {noun} is "
                "validated.")
        else:
            say(f"The best tested {noun} (#{valid + 1}) moved P(true) by {c.cei:+.1f} points, not beyond the "
                f"noise floor of {floor:g} points that an edit naming nothing relevant reaches; no {noun} is "
                "validated.")
        return None
    if valid != best_any:
        say(f"{noun.capitalize()} #{best_any + 1} had the largest CEI ({strong.cei:+.1f}) but its edit does not test "
            f"it ({describe_edit(strong)}); #{valid + 1}, the best {noun} whose edit kept the picture, is selected.")
    return valid


def beyond_floor(cei: float, floor: float) -> bool:
    """Evidence: a CEI strictly above the noise floor. A CEI exactly at the floor is within it (inclusive rule):
    the floor is the largest rise an irrelevant edit was seen to reach, so reaching it shows nothing more."""
    return cei > floor


def _prefer_unflagged(candidates, best_any, threshold, say, noun) -> int | None:
    far = [c.edit_distance is not None and c.edit_distance >= threshold for c in candidates]
    if best_any is None or not far[best_any]:
        return best_any
    near_ids = {id(c) for c, f in zip(candidates, far) if not f}
    near = _argmax(candidates, lambda c: id(c) in near_ids)
    if near is None:
        say(f"Every tested {noun}'s edit changed the whole image (distance >= {threshold:.2f}); the selected one "
            f"may not reflect its {noun}.")
        return best_any
    say(f"{noun.capitalize()} #{best_any + 1} had the largest CEI ({candidates[best_any].cei:+.1f}) but its edit "
        f"changed the whole image ({describe_edit(candidates[best_any])} >= {threshold:.2f}); #{near + 1}, the best "
        f"{noun} below the distance threshold, is selected (rule prefer-unflagged).")
    return near


def _why_flagged_won(candidates, best, noun) -> str:
    c = candidates[best]
    runner = _runner_up(candidates, best)
    text = f"The selected {noun} (#{best + 1}, CEI {c.cei:+.1f}) is flagged: {describe_edit(c)}."
    if c.edit_verdict == "global":
        text += " A whole-image change is a valid test of a global cause (a background, a style, a colour)."
    elif (c.edit_control or {}).get("passed"):
        text += (" The reference control decided: the same edit did not raise the true class on references of other "
                 f"classes ({c.edit_control['control_effect']:+.1f} points).")
    else:
        text += f" Its CEI may come from what the edit did, not from the {noun}."
    if runner is not None:
        r = candidates[runner]
        text += (f" Runner-up: #{runner + 1}, CEI {r.cei:+.1f} ({describe_edit(r)}); the selected one won on "
                 f"evidence ({c.cei - r.cei:+.1f} points).")
    return text


def edit_check_record(candidates: Sequence[Candidate], threshold: float, selection: str,
                      noise_floor: float = DEFAULT_NOISE_FLOOR, selected: int | None = None,
                      control: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest's record of the check: settings, the measures used, the verdicts and the runner-up; with
    `control` (edit_control.ReferenceControl.record()), the control's settings and each candidate's reading."""
    metrics = sorted({c.edit_distance_metric for c in candidates if c.edit_distance_metric})
    record = {"flag_threshold": threshold, "selection": selection, "cei_noise_floor": noise_floor,
              "structure_kept_threshold": STRUCTURE_KEPT,
              "metric": metrics[0] if len(metrics) == 1 else (metrics or None),
              "flagged": [j for j, c in enumerate(candidates) if c.edit_flagged],
              "distances": [c.edit_distance for c in candidates],
              "structure": [c.edit_structure for c in candidates],
              "verdicts": [c.edit_verdict for c in candidates],
              "structure_readings": [c.edit_structure_reading for c in candidates],
              "decided_by": [c.edit_verdict_reason for c in candidates]}
    if control is not None:
        record["control"] = {**control, "readings": [c.edit_control for c in candidates]}
    if selected is not None and candidates[selected].edit_flagged:
        runner = _runner_up(candidates, selected)
        record["runner_up"] = runner
        record["reason"] = _why_flagged_won(candidates, selected, "candidate")
    return record
