"""Destructive edits (issues 19 and 27): every image counterfactual carries its distance from the original and
the share of its structure kept; flagged edits are kept and shown, never dropped; the evidence rule never lets a
destroyed edit or one without evidence win over a tested cause; rule, threshold and floor are in key and manifest.
Uses the digits world (real CNN, scripted MLLM double, real PIL edits) with an editor double that buries its
edit in colour noise over the whole image."""
from __future__ import annotations

import numpy as np
import pytest
from digits_world import DigitsEditor, ScriptedDigitsMLLM
from PIL import Image

from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.methods.edit_check import edit_check_record, judge_edits, select
from nemo_desktop.core.base.records import Candidate
from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline


class NoisyRecolourEditor(DigitsEditor):
    """Recolours the digit red as asked, then blends 70 % colour noise into every pixel (the whole image moves)."""

    def edit(self, image, instruction, **kw):
        out = super().edit(image, instruction, **kw)
        if "red" not in instruction.lower():
            return out
        rng = np.random.default_rng(0)
        arr = 0.3 * np.asarray(out, dtype=np.float64) + 0.7 * rng.uniform(0, 255, size=(*out.size[::-1], 3))
        return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")


@pytest.fixture
def index(digits_classifier, reference_folder, store):
    return build_index(reference_folder, digits_classifier, store)


def run(classifier, store, index, editor, **cfg):
    pipe = SciTXPipeline(classifier, ScriptedDigitsMLLM(), editor, store=store, reference=index,
                         config=SciTXConfig(**{"k": 2, "m": 3, **cfg}))
    return pipe


def test_whole_image_edit_is_measured_flagged_and_recorded(digits_classifier, blue_three, store, index):
    """The old guard's noise editor: its edit is measured, judged destroyed, flagged and never selected."""
    result = run(digits_classifier, store, index, NoisyRecolourEditor(), selection="cei")(blue_three, "three")
    noisy = [j for j, c in enumerate(result.candidates) if "red" in (c.intervention or "").lower()]
    assert len(noisy) == 1
    j = noisy[0]
    c = result.candidates[j]
    assert c.edit_distance >= 0.6 and c.edit_distance_metric == "1-ssim"  # no LPIPS weights here
    assert c.edit_structure < 0.8 and c.edit_verdict == "destroyed" and c.edit_flagged
    default = run(digits_classifier, store, index, NoisyRecolourEditor())(blue_three, "three")
    assert default.selected_index != j  # the evidence rule: a destroyed picture is no test of its hypothesis
    check = default.manifest["edit_check"]
    assert j in check["flagged"] and check["verdicts"][j] == "destroyed" and check["selection"] == "evidence"
    assert check["metric"] == "1-ssim" and len(check["distances"]) == len(check["structure"]) == 3
    assert default.manifest["config"]["edit_flag_threshold"] == 0.6
    assert default.manifest["config"]["cei_noise_floor"] == 5.0
    from nemo_desktop.core.base.records import ExplanationResult

    stored = ExplanationResult.from_dict(store.get(default.result_key).payload)
    assert stored.candidates[j].edit_verdict == "destroyed" and stored.candidates[j].edit_flagged
    assert stored.candidates[j].edit_structure == default.candidates[j].edit_structure


def test_threshold_rule_and_floor_are_in_the_key(digits_classifier, blue_three, store, index):
    a = run(digits_classifier, store, index, NoisyRecolourEditor())(blue_three, "three")
    b = run(digits_classifier, store, index, NoisyRecolourEditor(), edit_flag_threshold=1.0)(blue_three, "three")
    c = run(digits_classifier, store, index, NoisyRecolourEditor(), selection="cei")(blue_three, "three")
    d = run(digits_classifier, store, index, NoisyRecolourEditor(), cei_noise_floor=1.0)(blue_three, "three")
    assert len({a.result_key, b.result_key, c.result_key, d.result_key}) == 4
    assert not any(x.edit_verdict == "global" for x in b.candidates)  # threshold 1.0: no whole-image change
    best_cei = max(range(3), key=lambda i: (c.candidates[i].cei is not None, c.candidates[i].cei or 0))
    assert c.selected_index == best_cei  # the paper's rule: plain argmax, flagged or not
    if c.candidates[c.selected_index].edit_flagged:
        assert any("is flagged" in n and "Runner-up" in n for n in c.notes)


def cand(cei, dist, structure=0.99, metric="1-ssim"):
    return Candidate(hypothesis=f"h{cei}", cei=cei, edit_distance=dist, edit_distance_metric=metric,
                     edit_structure=structure)


def test_evidence_rule_prefers_a_tested_global_cause_to_no_evidence():
    """Issue 27's world: the background edit changes the whole image (CEI +97.6), rotation does nothing."""
    cands = [cand(97.6, 1.0), cand(-0.0, 0.05), cand(7e-10, 0.02)]
    notes: list[str] = []
    assert select(cands, "evidence", 0.6, notes, "hypothesis") == 0
    assert cands[0].edit_verdict == "global" and cands[0].edit_flagged
    assert "Runner-up: #3" in notes[0] and "won on evidence" in notes[0]
    record = edit_check_record(cands, 0.6, "evidence", 5.0, 0)
    assert record["runner_up"] == 2 and "Runner-up" in record["reason"] and record["verdicts"][0] == "global"
    # the earlier default picked the rotation hypothesis with no evidence: kept as a named option
    assert select(cands, "prefer-unflagged", 0.6, [], "hypothesis") == 2


def test_evidence_rule_never_selects_destroyed_or_unchanged_edits():
    notes: list[str] = []
    noise, kept = cand(94.9, 0.97, structure=0.3), cand(12.0, 0.1)
    assert select([noise, kept], "evidence", 0.6, notes, "hypothesis") == 1
    assert noise.edit_verdict == "destroyed" and "does not test it" in notes[0]
    notes.clear()  # the only kept edit has no evidence while the destroyed one moved P(true): nothing validated
    assert select([cand(94.9, 0.97, 0.3), cand(1.0, 0.1)], "evidence", 0.6, notes, "hypothesis") is None
    assert "noise floor of 5 points" in notes[0] and "no hypothesis is validated" in notes[0]
    notes.clear()
    assert select([cand(60.0, 0.9, 0.2), cand(30.0, 0.8, 0.5)], "evidence", 0.6, notes, "hypothesis") is None
    assert notes[0].startswith("Every tested hypothesis's edit destroyed the picture or changed nothing")
    no_op = cand(0.0, 0.0, structure=1.0)
    assert select([no_op], "evidence", 0.6, [], "hypothesis") is None and no_op.edit_verdict == "no change"
    # no explanation without evidence: the best candidate overall, within the floor, is not selected either
    notes.clear()
    assert select([cand(2.0, 0.1), cand(-3.0, 0.1)], "evidence", 0.6, notes, "hypothesis") is None
    assert "not beyond the noise floor of 5 points" in notes[0] and "no hypothesis is validated" in notes[0]
    # the floor is a setting
    assert select([cand(94.9, 0.97, 0.3), cand(1.0, 0.1)], "evidence", 0.6, [], "hypothesis", noise_floor=0.5) == 1


def test_a_cei_exactly_at_the_floor_is_within_it_and_just_above_is_evidence():
    """Issue 45: the floor is inclusive, and it applies when the best valid candidate is the best overall."""
    notes: list[str] = []
    assert select([cand(5.0, 0.1), cand(1.0, 0.1)], "evidence", 0.6, notes, "hypothesis", noise_floor=5.0) is None
    assert "+5.0 points, not beyond the noise floor of 5 points" in notes[0]
    assert select([cand(5.0001, 0.1), cand(1.0, 0.1)], "evidence", 0.6, [], "hypothesis", noise_floor=5.0) == 0
    # at the floor beside a destroyed edit that moved P(true): the failed-test note, nothing selected
    notes.clear()
    assert select([cand(5.0, 0.1), cand(90.0, 0.97, 0.2)], "evidence", 0.6, notes, "hypothesis") is None
    assert "does not test it" in notes[0] and "beyond the noise floor" in notes[0]
    # a floor of 0: any rise is evidence, no rise is not
    assert select([cand(0.0, 0.1)], "evidence", 0.6, [], "hypothesis", noise_floor=0.0) is None
    assert select([cand(0.01, 0.1)], "evidence", 0.6, [], "hypothesis", noise_floor=0.0) == 0
    # the paper's rule has no floor: it selects the argmax whatever its size
    assert select([cand(1.0, 0.1)], "cei", 0.6, [], "hypothesis") == 0


def test_ties_in_cei_go_to_the_first_candidate_and_a_valid_edit_wins_a_tie_with_an_invalid_one():
    assert select([cand(40.0, 0.1), cand(40.0, 0.2)], "evidence", 0.6, [], "hypothesis") == 0
    assert select([cand(40.0, 0.2), cand(40.0, 0.1)], "evidence", 0.6, [], "hypothesis") == 0
    notes: list[str] = []
    destroyed_first = [cand(40.0, 0.97, 0.2), cand(40.0, 0.1)]
    assert select(destroyed_first, "evidence", 0.6, notes, "hypothesis") == 1
    assert "#1 had the largest CEI (+40.0) but its edit does not test it" in notes[0]
    assert select([cand(40.0, 0.1), cand(40.0, 0.97, 0.2)], "evidence", 0.6, [], "hypothesis") == 0
    unchanged_first = [cand(40.0, 0.0, 1.0), cand(40.0, 0.1)]
    assert select(unchanged_first, "evidence", 0.6, [], "hypothesis") == 1
    # the paper's rule and the legacy one: first on ties too
    assert select([cand(40.0, 0.97, 0.2), cand(40.0, 0.1)], "cei", 0.6, [], "hypothesis") == 0
    assert select([cand(40.0, 0.1), cand(40.0, 0.2)], "prefer-unflagged", 0.6, [], "hypothesis") == 0


def test_cei_and_legacy_rules():
    cands = [cand(10.0, 0.1), cand(94.9, 0.97, structure=0.3), cand(5.0, None)]
    notes: list[str] = []
    assert select(cands, "prefer-unflagged", 0.6, notes, "hypothesis") == 0
    assert [c.edit_flagged for c in cands] == [False, True, False]
    assert "#2 had the largest CEI (+94.9)" in notes[0] and "1-ssim 0.97" in notes[0]
    notes.clear()
    assert select(cands, "cei", 0.6, notes, "hypothesis") == 1
    assert "destroyed or replaced" in notes[0] and "Runner-up: #1" in notes[0]
    notes.clear()
    assert select([cand(3.0, 0.8), cand(7.0, 0.9)], "prefer-unflagged", 0.6, notes, "hypothesis") == 1
    assert notes[0].startswith("Every tested hypothesis's edit changed the whole image")
    assert judge_edits([cand(1.0, 0.5)], 0.5) == [0]  # at the threshold counts


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError):
        SciTXConfig(edit_flag_threshold=1.5)
    with pytest.raises(ConfigError):
        SciTXConfig(selection="largest")
    with pytest.raises(ConfigError):
        SciTXConfig(cei_noise_floor=-1.0)


def test_every_verdict_says_which_test_decided_it():
    """Issue 45: the verdict's reason in words, on the candidate and in the manifest's record."""
    destroyed = Candidate(hypothesis="a", cei=40.0, edit_distance=0.97, edit_distance_metric="1-ssim",
                          edit_structure=0.3, edit_structure_reading="in place")
    restored = Candidate(hypothesis="b", cei=30.0, edit_distance=0.2, edit_distance_metric="1-ssim",
                         edit_structure=0.98, edit_structure_reading="restoration")
    whole = Candidate(hypothesis="c", cei=20.0, edit_distance=0.9, edit_distance_metric="lpips-alex",
                      edit_structure=0.97, edit_structure_reading="removal")
    unchanged = Candidate(hypothesis="d", cei=0.0, edit_distance=0.0, edit_distance_metric="1-ssim",
                          edit_structure=1.0)
    cands = [destroyed, restored, whole, unchanged]
    judge_edits(cands, 0.6)
    assert destroyed.edit_verdict_reason == ("structure test (edge maps compared in place (they do not correlate "
                                             "enough for a removal)): 0.30, below 0.80 -> destroyed or replaced")
    assert restored.edit_verdict == "local" and restored.edit_verdict_reason.startswith(
        "structure test (degrading the edit (blur, pixelation, smoothing) reproduces the original): 0.98, at least "
        "0.80 -> kept; distance test: 1-ssim 0.20, below 0.60 -> local")
    assert whole.edit_verdict_reason.endswith("distance test: lpips-alex 0.90, at least 0.60 -> whole image")
    assert unchanged.edit_verdict_reason == "distance test: 1-ssim 0.0000, at most 0.001 -> no change"
    record = edit_check_record(cands, 0.6, "evidence", 5.0, 1)
    assert record["decided_by"] == [c.edit_verdict_reason for c in cands]
    assert record["structure_readings"] == ["in place", "restoration", "removal", None]
    assert Candidate(hypothesis="e", cei=1.0).edit_verdict_reason is None  # not an image edit: no verdict


# -- the reference control combined with the structure verdict (issue 45) -------------------------------------
class FakeControl:
    """The reference control's interface (edit_control.ReferenceControl) with given control effects per
    candidate index: a real rule decides (control_passes), only the references' figures are given."""

    def __init__(self, effects: dict[int, float] | None = None, why_off: str | None = None) -> None:
        self.effects = effects or {}
        self.why_off = why_off
        self.calls: list[int] = []

    @property
    def available(self) -> bool:
        return self.why_off is None

    def not_run(self, why):
        from nemo_desktop.core.methods.edit_control import ControlReading

        return ControlReading(ran=False, why_not=why)

    def __call__(self, j, c):
        from nemo_desktop.core.methods.edit_control import ControlReading, control_passes

        self.calls.append(j)
        if not self.available:
            return self.not_run(self.why_off)
        e = self.effects[j]
        return ControlReading(ran=True, passed=control_passes(c.cei, e, 5.0), query_cei=c.cei, control_effect=e,
                              n_refs=2, rises=[e, e])


def test_control_rule_is_relative_to_the_query_cei():
    from nemo_desktop.core.methods.edit_control import CONTROL_MAX_SHARE, control_passes

    assert control_passes(80.0, 1.0, 5.0)  # a cue removal: nothing happens on the references
    assert control_passes(98.9, 2.1, 5.0)  # digits_world: the true class's own cue (red) comes back a little
    assert control_passes(98.9, 9.4, 5.0)  # ... and more on blue eights: still below 0.1 of the CEI
    assert not control_passes(95.0, 94.0, 5.0)  # replacement / noise: as much on the references
    assert not control_passes(91.3, 16.6, 5.0)  # the development half's weakest replacement: 0.18 of the CEI
    assert not control_passes(8.0, 4.0, 5.0)  # specific effect +4 within the floor
    assert control_passes(6.0, -10.0, 5.0)  # a negative control does not inflate the specific effect ...
    assert not control_passes(4.0, -10.0, 5.0)  # ... nor rescue a CEI within the floor
    assert control_passes(20.0, 4.9, 5.0)  # a control within the floor never fails an edit (round trip)
    share = CONTROL_MAX_SHARE
    assert control_passes(100.0, share * 100.0, 5.0) and not control_passes(100.0, share * 100.0 + 0.1, 5.0)
    # the sign matters: a control that rises as much as the query is never specific, whatever the CEI
    for cei in (10.0, 50.0, 99.0):
        assert not control_passes(cei, cei, 5.0) and control_passes(cei, -cei, 5.0)


def test_a_failed_control_overrules_a_kept_structure_and_the_next_candidate_is_tried():
    replaced, true = cand(95.0, 0.3), cand(70.0, 0.2)  # both "local" by structure
    control = FakeControl({0: 93.0, 1: 2.0})
    notes: list[str] = []
    assert select([replaced, true], "evidence", 0.6, notes, "hypothesis", control=control) == 1
    assert control.calls == [0, 1]  # lazily, from the largest CEI down, until one passes
    assert replaced.edit_control["ran"] and not replaced.edit_control["passed"]
    assert replaced.edit_verdict_reason.startswith(
        "reference control: the same edit raised P(true) by at most +93.0 points on 2 references of other classes, +95.0 on "
        "this image (specific effect +2.0): specific effect not beyond the noise floor of 5 and control beyond the "
        "floor and above 0.10 of the CEI -> the edit raises the true class on other images too, overruling the "
        "structure test")
    assert true.edit_verdict_reason.startswith("reference control: the same edit raised P(true) by at most +2.0 points")
    assert "-> tests the hypothesis; structure test" in true.edit_verdict_reason
    assert "#1 had a larger CEI (+95.0) but the same edit raised P(true) on references" in notes[0]
    record = edit_check_record([replaced, true], 0.6, "evidence", 5.0, 1, {"references": 2})
    assert record["control"]["readings"][0]["control_effect"] == 93.0 and record["control"]["references"] == 2
    assert record["decided_by"][0].startswith("reference control")


def test_a_passed_control_overrules_destroyed_but_not_no_change():
    flat = cand(97.0, 0.4, structure=0.0)  # a cue removed from a flat patch: no structure left to measure
    control = FakeControl({0: 1.0})
    notes: list[str] = []
    assert select([flat, cand(2.0, 0.1)], "evidence", 0.6, notes, "hypothesis", control=control) == 0
    assert flat.edit_verdict == "destroyed" and flat.edit_flagged  # what the structure said is kept and shown
    assert flat.edit_verdict_reason.startswith("reference control") and \
        ", overruling the structure test" in flat.edit_verdict_reason
    assert any("the control decides" in n for n in notes)
    assert any("The reference control decided" in n for n in notes)
    unchanged = cand(40.0, 0.0, structure=1.0)
    control = FakeControl({0: 0.0})
    assert select([unchanged], "evidence", 0.6, [], "hypothesis", control=control) is None
    assert control.calls == [] and "reference control not run (the edit changed nothing)" in \
        unchanged.edit_verdict_reason


def test_no_control_leaves_the_structure_verdict_and_says_so():
    noise, kept = cand(94.9, 0.97, structure=0.3), cand(12.0, 0.1)
    control = FakeControl(why_off="no correctly classified reference of another class")
    assert select([noise, kept], "evidence", 0.6, [], "hypothesis", control=control) == 1
    assert noise.edit_verdict == "destroyed" and not noise.edit_control["ran"]
    assert kept.edit_verdict_reason.endswith(
        "; reference control not run (no correctly classified reference of another class)")
    # within the floor: never selected, and the control is not spent on it
    control = FakeControl({0: 0.0})
    low = cand(4.0, 0.1)
    assert select([low], "evidence", 0.6, [], "hypothesis", control=control) is None
    assert control.calls == [] and "within the noise floor of 5" in low.edit_verdict_reason
    # below the selected one: not reached, said so
    control = FakeControl({0: 0.0, 1: 0.0})
    a, b = cand(50.0, 0.1), cand(30.0, 0.1)
    assert select([a, b], "evidence", 0.6, [], "hypothesis", control=control) == 0
    assert control.calls == [0] and "a hypothesis with a larger CEI was selected" in b.edit_verdict_reason
    # every controlled edit failed: nothing is validated, in words
    notes: list[str] = []
    control = FakeControl({0: 50.0, 1: 29.0})
    assert select([cand(50.0, 0.1), cand(30.0, 0.1)], "evidence", 0.6, notes, "hypothesis", control=control) is None
    assert "does not test its hypothesis" in notes[0] and "no hypothesis is validated" in notes[0]
    # the old callers (no control): words as before
    plain = cand(50.0, 0.1)
    select([plain], "evidence", 0.6, [], "hypothesis")
    assert plain.edit_control is None and "reference control" not in plain.edit_verdict_reason


def test_the_control_passes_the_recolour_that_removes_the_predicted_class_cue(digits_classifier, blue_three,
                                                                               store, index):
    """The digits world: every "eight" is blue, other digits come in any other ink (red among them), so a blue
    three is taken for an eight. "Recolour the digit red" removes the eight's cue: on six references of other
    classes (the default) it leaves P(three) where it was, and the recolour is selected with the control's
    figures in its verdict, the manifest and the key (a run with the control off has another key)."""
    result = run(digits_classifier, store, index, DigitsEditor())(blue_three, "three")
    c = result.candidates[result.selected_index]
    assert "red" in c.intervention.lower() and c.cei > 50
    ctl = c.edit_control
    assert ctl["ran"] and ctl["passed"] and ctl["n_refs"] == 6 == ctl["n_planned"] and len(ctl["rises"]) == 6
    assert ctl["rule"] == "points+reference-log-odds" and ctl["control_logit_effect"] <= 3.5
    assert ctl["control_effect"] == max(ctl["rises"]) and ctl["query_cei"] == c.cei
    assert c.edit_verdict_reason.startswith("reference control: the same edit raised P(true) by at most")
    assert "within the 3.5 nats the editor's round trip moves a reference -> tests the hypothesis" in \
        c.edit_verdict_reason
    record = result.manifest["edit_check"]
    assert record["control"]["references"] == 6 and record["control"]["readings"][result.selected_index] == ctl
    assert result.manifest["config"]["edit_control_references"] == 6
    off = run(digits_classifier, store, index, DigitsEditor(), edit_control_references=0)(blue_three, "three")
    assert off.result_key != result.result_key and off.selected_index == result.selected_index
    assert "edit_control_references" not in off.manifest["config"]  # off = the keys results had before
    assert "reference control not run (off" in off.candidates[off.selected_index].edit_verdict_reason
    with pytest.raises(ConfigError):
        SciTXConfig(edit_control_references=-1)


def test_with_the_control_ties_go_to_the_first_candidate_and_the_floor_is_inclusive():
    """Issue 42 §7 in the control's path: equal CEIs are controlled in candidate order; a CEI exactly at the floor
    is within it (never controlled, never selected)."""
    control = FakeControl({0: 0.0, 1: 0.0})
    assert select([cand(40.0, 0.1), cand(40.0, 0.2)], "evidence", 0.6, [], "hypothesis", control=control) == 0
    assert control.calls == [0]
    control = FakeControl({0: 40.0, 1: 0.0})  # the first of the tie fails its control: the second is selected
    assert select([cand(40.0, 0.1), cand(40.0, 0.2)], "evidence", 0.6, [], "hypothesis", control=control) == 1
    assert control.calls == [0, 1]
    control = FakeControl({0: 0.0})
    at_floor = cand(5.0, 0.1)
    assert select([at_floor], "evidence", 0.6, [], "hypothesis", control=control) is None
    assert control.calls == [] and "CEI +5.0 within the noise floor of 5" in at_floor.edit_verdict_reason
    control = FakeControl({0: 0.0})
    assert select([cand(5.0001, 0.1)], "evidence", 0.6, [], "hypothesis", control=control) == 0


def test_without_a_runnable_control_the_user_is_still_told_why_the_strongest_edit_lost():
    """A control that cannot run (no reference index) leaves the structure test to decide, and the note that
    names the strongest candidate and why it lost is given, as without a control."""
    for control in (None, FakeControl(why_off="no reference index was given")):
        noise, kept = cand(50.0, 0.97, structure=0.3), cand(30.0, 0.1)
        notes: list[str] = []
        assert select([noise, kept], "evidence", 0.6, notes, "hypothesis", control=control) == 1
        assert any(n.startswith("Hypothesis #1 had the largest CEI (+50.0) but its edit does not test it")
                   and n.endswith("is selected.") and "#2" in n for n in notes), (control, notes)


def test_a_control_failed_in_log_odds_is_told_in_log_odds():
    """The note on a candidate the control failed quotes the log-odds where the rule read them: a paste can rise
    +0.9 points (within the floor) and +6.9 nats on a confident reference."""
    from nemo_desktop.core.methods.edit_control import ControlReading

    class LogOddsControl(FakeControl):
        def __call__(self, j, c):
            self.calls.append(j)
            passed = j != 0
            return ControlReading(ran=True, passed=passed, query_cei=c.cei, control_effect=0.9, n_refs=6,
                                  rises=[0.9], query_logit_rise=9.0, control_logit_effect=0.1 if passed else 6.9,
                                  logit_rises=[6.9], rule="points+reference-log-odds")

    notes: list[str] = []
    assert select([cand(60.0, 0.1), cand(40.0, 0.1)], "evidence", 0.6, notes, "hypothesis",
                  control=LogOddsControl()) == 1
    assert any("by +0.9 points (+6.90 nats in log-odds): it does not test its hypothesis" in n for n in notes)


def test_the_control_settings_enter_the_key_only_with_the_evidence_rule():
    """The shipped table configs select by the paper's CEI rule: no control runs, so its settings stay out of
    the key and the manifest's config (their keys as before the control existed)."""
    for selection in ("cei", "prefer-unflagged"):
        d = SciTXConfig(selection=selection).as_dict()
        assert not {"edit_control_references", "edit_control_rule", "edit_semantic_check"} & set(d)
    assert SciTXConfig().as_dict()["edit_control_references"] == 6
