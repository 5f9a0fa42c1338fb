"""The reference control's log-odds reading (issue 45, methods/edit_control.py): a drawing of the true class
pasted onto a confidently classified reference raises P(true) from ~0.001 to ~0.01 (nothing in points, +2.3 in
log-odds); removing a cue the reference does not have leaves it within the round trip."""
from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.job_context import null_context
from nemo_desktop.core.methods.edit_control import (CONTROL_LOGIT_ALLOWANCE, CONTROL_MAX_LOGIT_SHARE,
                                                    REFERENCE_LOGIT_ALLOWANCE, REFERENCE_LOGIT_CLAMP,
                                                    ReferenceControl, describe_control, logit, logit_control_passes,
                                                    logit_rise, reference_logit_passes)
from nemo_desktop.core.methods.intervention import UnitCache
from nemo_desktop.core.base.records import Candidate, Observation, SampleInfo


def test_logit_rise_has_the_sign_of_the_rise_and_stays_finite():
    assert logit(0.5) == 0.0
    assert logit_rise(0.001, 0.01) == pytest.approx(math.log(0.01 / 0.99) - math.log(0.001 / 0.999))
    assert logit_rise(0.001, 0.01) > 2.3 and logit_rise(0.01, 0.001) < -2.3  # rise, not fall
    assert math.isfinite(logit_rise(0.0, 1.0)) and logit_rise(0.0, 1.0) == pytest.approx(2 * math.log(1e6 - 1))


def test_log_odds_reading_fails_a_paste_and_passes_a_round_trip():
    paste_ref, paste_query = logit_rise(0.001, 0.01), logit_rise(0.3, 0.8)  # +2.30 there, +2.23 here
    assert not logit_control_passes(paste_query, paste_ref)
    true_ref, true_query = logit_rise(0.001, 0.0015), logit_rise(0.05, 0.95)  # round trip there, the cue here
    assert logit_control_passes(true_query, true_ref)
    assert logit_control_passes(true_query, logit_rise(0.001, 0.0009))  # a fall never fails it
    # tests/core/methods/digits_world.py: the true class has a cue of its own (red): +7.1 there, +18.2 here
    assert logit_control_passes(18.2, 7.1)
    # the boundaries: the allowance, then the share of the query's rise, inclusive; the next step fails
    a, s = CONTROL_LOGIT_ALLOWANCE, CONTROL_MAX_LOGIT_SHARE
    assert logit_control_passes(0.1, a) and not logit_control_passes(0.1, a + 0.01)
    assert logit_control_passes(10.0, s * 10.0) and not logit_control_passes(10.0, s * 10.0 + 0.01)


class _Tester:
    """The classifier and editor a ReferenceControl calls: each image's red value names its probabilities;
    the edit maps it to another value (a test double of CounterfactualTester's two calls)."""

    def __init__(self, probs: dict[int, list[float]], edits: dict[int, int], per_call: int = 1) -> None:
        self.probs, self.edits, self.per_call, self.calls = probs, edits, per_call, []

    def classify(self, units, img, sha, clf):
        return np.asarray(self.probs[img.getpixel((0, 0))[0]])

    def working_size(self, size):
        return size, "input"

    def edits_per_call(self, size, *, images=False):
        return self.per_call

    def edit_many(self, ctx, units, items, instruction, stage):
        self.calls.append(len(items))
        return [Image.new("RGB", (1, 1), (self.edits[img.getpixel((0, 0))[0]], 0, 0)) for img, _ in items]


def _control(rule: str, after: float, before: float = 0.001, per_call: int = 1) -> tuple[ReferenceControl, Candidate]:
    """Two references of classes 2 and 3, the first at P(true) `before` (default 0.001), the second at 0.001; the
    edit takes the first to P(true) `after` and the second to 0.0012."""
    probs = {10: [before, 0.0, 1 - before, 0.0], 11: [after, 0.0, 1 - after, 0.0],
             20: [0.001, 0.0, 0.0, 0.999], 21: [0.0012, 0.0, 0.0, 0.9988]}
    refs = [Observation("C", f"r{v}.png", f"sha{v}", label, f"class {label}") for v, label in ((10, 2), (20, 3))]
    sample = SampleInfo("q.png", "shaq", 0, "true", 1, "pred", 0.3, 0.7)
    control = ReferenceControl(null_context(), UnitCache(None), _Tester(probs, {10: 11, 20: 21}, per_call), {},
                               sample, refs, 2,
                               lambda obs: Image.new("RGB", (1, 1), (int(obs.image_path[1:3]), 0, 0)), 5.0,
                               rule=rule)
    cand = Candidate(hypothesis="h", intervention_kind="image", intervention="paste", prob_true_before=0.3,
                     prob_true_after=0.8, cei=50.0)
    return control, cand


def test_the_relative_log_odds_rule_fails_a_paste_the_points_rule_lets_through():
    control, cand = _control("points+log-odds", after=0.01)
    r = control(0, cand)
    assert r.ran and r.rule == "points+log-odds"
    assert r.control_effect == pytest.approx(0.9) and r.query_cei == 50.0  # +0.9 points: within the floor
    assert r.control_logit_effect == pytest.approx(logit_rise(0.001, 0.01))
    assert r.query_logit_rise == pytest.approx(logit_rise(0.3, 0.8))
    # the first reference already fails it: the second is not edited
    assert r.logit_rises == pytest.approx([logit_rise(0.001, 0.01)]) and r.n_refs == 1 and r.n_planned == 2
    assert not r.passed
    words = describe_control(r, 5.0)
    assert "in log-odds at most +2.31 nats there, +2.23 here" in words
    assert "log-odds rise on the references beyond 2 nats and above 0.50 of this image's" in words
    assert words.endswith("-> the edit raises the true class on other images too")
    record = control.record()
    assert record["rule"]["name"] == "points+log-odds" and record["rule"]["logit_allowance_nats"] == 2.0
    control, cand = _control("points", after=0.01)
    r = control(0, cand)
    assert r.passed and r.rule == "points" and "log-odds within" not in describe_control(r, 5.0)
    assert "logit_allowance_nats" not in control.record()["rule"]


def test_the_relative_log_odds_rule_passes_a_reference_left_within_the_round_trip():
    control, cand = _control("points+log-odds", after=0.0015)
    r = control(0, cand)
    assert r.passed and "and in log-odds within 2 nats" in describe_control(r, 5.0)


def test_an_unknown_control_rule_is_refused_in_words():
    from nemo_desktop.core.methods.scitx import SciTXConfig

    with pytest.raises(ConfigError, match="Unknown reference-control rule 'logit'"):  # noqa: PT012
        SciTXConfig(edit_control_rule="logit")
    default, points = SciTXConfig().as_dict(), SciTXConfig(edit_control_rule="points").as_dict()
    assert default["edit_control_rule"] == "points+reference-log-odds" and default["edit_control_references"] == 6
    assert "edit_control_rule" not in points  # the rule results had before it existed: their keys stay
    assert "edit_control_rule" not in SciTXConfig(edit_control_references=0).as_dict()  # no control to read


def test_the_reference_rule_reads_a_confident_reference_the_clamp_hid():
    """A drawing of the true class on a reference the classifier is sure of (P(true) 1e-10 -> 1e-7): the clamp at
    1e-6 reads no rise at all, and the relative rule passes it; the default reads +6.9 nats and fails it."""
    assert logit_rise(1e-10, 1e-7) == 0.0  # the old reading: both clamped to 1e-6
    assert logit_rise(1e-10, 1e-7, REFERENCE_LOGIT_CLAMP) == pytest.approx(math.log(1000), abs=1e-3)
    old, cand = _control("points+log-odds", after=1e-7, before=1e-10)
    assert old(0, cand).passed
    control, cand = _control("points+reference-log-odds", after=1e-7, before=1e-10)
    r = control(0, cand)
    assert not r.passed and r.rule == "points+reference-log-odds"
    assert r.control_logit_effect == pytest.approx(math.log(1000), abs=1e-3)
    words = describe_control(r, 5.0)
    assert f"a reference's log-odds rose by +6.91 nats, beyond the {REFERENCE_LOGIT_ALLOWANCE:g} nats" in words
    assert words.endswith("-> the edit raises the true class on other images too")
    rule = control.record()["rule"]
    assert rule["reference_logit_allowance_nats"] == REFERENCE_LOGIT_ALLOWANCE and rule["logit_clamp"] == 1e-30


def test_the_reference_rule_passes_the_round_trip_and_its_boundary_is_inclusive():
    control, cand = _control("points+reference-log-odds", after=2e-10, before=1e-10)  # +0.69 nats
    r = control(0, cand)
    assert r.passed and r.n_refs == 2 == r.n_planned
    assert "within the 3.5 nats the editor's round trip moves a reference -> tests the hypothesis" in \
        describe_control(r, 5.0)
    a = REFERENCE_LOGIT_ALLOWANCE
    assert reference_logit_passes(a) and not reference_logit_passes(a + 0.01)
    assert reference_logit_passes(-9.0)  # a fall never fails it


@pytest.mark.parametrize("per_call", [1, 2])
def test_the_control_stops_editing_references_once_the_edit_has_failed(per_call):
    """References go to the editor in its batches; once one fails the edit, no further batch is spent (more
    references can only raise the effects). Within a batch every reference is read."""
    control, cand = _control("points+reference-log-odds", after=1e-7, before=1e-10, per_call=per_call)
    r = control(0, cand)
    assert not r.passed and control.tester.calls == [per_call]
    assert r.n_refs == per_call and r.n_planned == 2
    if per_call == 1:
        assert "on 1 reference of other classes (stopped after 1 of 2: the edit had already failed)" in \
            describe_control(r, 5.0)
    control, cand = _control("points+reference-log-odds", after=2e-10, before=1e-10, per_call=per_call)
    assert control(0, cand).passed and sum(control.tester.calls) == 2


def test_the_batch_size_is_asked_again_before_every_batch():
    """As edit_all does: the first edit of a working size runs alone (the editor measures its memory), and the
    size the editor then says fits is used for the next batch, not the answer it gave before measuring."""
    probs = {v: [0.001, 0.0, 0.999, 0.0] for v in range(10, 17)}
    refs = [Observation("C", f"r{v}.png", f"sha{v}", 2, "class 2") for v in range(10, 16)]
    tester = _Tester(probs, {v: 16 for v in range(10, 16)})
    answers = iter([1, 8])
    tester.edits_per_call = lambda size, images=False: next(answers)
    sample = SampleInfo("q.png", "shaq", 0, "true", 1, "pred", 0.3, 0.7)
    control = ReferenceControl(null_context(), UnitCache(None), tester, {}, sample, refs, 6,
                               lambda obs: Image.new("RGB", (1, 1), (int(obs.image_path[1:3]), 0, 0)), 5.0)
    cand = Candidate(hypothesis="h", intervention_kind="image", intervention="edit", prob_true_before=0.3,
                     prob_true_after=0.8, cei=50.0)
    r = control(0, cand)
    assert r.passed and r.n_refs == 6 and tester.calls == [1, 5]


def test_the_manifest_says_the_control_ran_only_when_it_did():
    control, cand = _control("points+reference-log-odds", after=2e-10, before=1e-10)
    assert control.available and control.record()["ran"] is False  # available, never called (e.g. CEIs in floor)
    control(0, cand)
    assert control.record()["ran"] is True
