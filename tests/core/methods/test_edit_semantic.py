"""SciTX's optional semantic check of an edit by the MLLM (issue 45; methods/edit_semantic.py): it can only veto an
edit the other tests accept, says in the verdict's words when it decided and what the MLLM said, never passes or
fails silently on an unreadable answer, and is off by default with the result keys as before."""
from __future__ import annotations

import json
from html import escape as html_escape

import pytest
from digits_world import DigitsEditor, ScriptedDigitsMLLM
from PIL import Image
from semantic_doubles import SemanticDigitsMLLM

from nemo_desktop.core.base.job_context import null_context
from nemo_desktop.core.base.records import Candidate, ExplanationResult, SampleInfo
from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.methods.edit_check import select
from nemo_desktop.core.methods.edit_control import ControlReading, control_passes
from nemo_desktop.core.methods.edit_semantic import SemanticCheck, describe_semantic, read_answer
from nemo_desktop.core.methods.intervention import UnitCache
from nemo_desktop.core.methods.prompts import load_prompt
from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline


# -- reading the answer ---------------------------------------------------------------------------------------
def outcome(answer: dict | str, error: str | None = None) -> dict:
    raw = answer if isinstance(answer, str) else json.dumps(answer)
    parsed = None if isinstance(answer, str) else answer
    return {"value": None if error else (parsed or {}).get("verdict"), "error": error, "raw_reply": raw,
            "repair_reply": None, "parsed": parsed}


def test_an_answer_is_read_strictly_and_what_cannot_be_read_is_not_run_in_words():
    ok = read_answer(outcome({"cue_changed": "yes", "same_scene": True, "verdict": "Tests the hypothesis",
                              "reason": "The ink is\nred now.\x07"}))
    assert ok.ran and ok.valid and ok.verdict == "tests-the-hypothesis" and ok.reason == "The ink is red now."
    assert describe_semantic(ok) == ('semantic check by the MLLM: the edit changed what the hypothesis names and '
                                     'kept the picture ("The ink is red now.") -> tests the hypothesis')
    for verdict in ("cue-not-changed", "true-class-painted-in", "object-replaced", "picture-destroyed"):
        r = read_answer(outcome({"cue_changed": True, "same_scene": False, "verdict": verdict, "reason": "x"}))
        assert r.ran and r.valid is False and r.verdict == verdict
        assert describe_semantic(r).endswith('("x") -> does not test the hypothesis')
    unreadable = read_answer(outcome("no json here", error="Unreadable reply, also after one repair request: no"))
    assert not unreadable.ran and unreadable.valid is None and unreadable.raw_reply == "no json here"
    assert describe_semantic(unreadable) == ("semantic check not run (the MLLM's answer could not be read: "
                                             "Unreadable reply, also after one repair request: no)")
    unknown = read_answer(outcome({"cue_changed": True, "same_scene": True, "verdict": "maybe", "reason": ""}))
    assert not unknown.ran and "verdict 'maybe' is not one of tests-the-hypothesis" in unknown.why_not
    lacking = read_answer(outcome({"verdict": "object-replaced", "reason": "x"}))
    assert not lacking.ran and "lacks a true/false cue_changed or same_scene" in lacking.why_not
    contradiction = read_answer(outcome({"cue_changed": False, "same_scene": True,
                                         "verdict": "tests-the-hypothesis", "reason": "x"}))
    assert not contradiction.ran and "contradicts itself" in contradiction.why_not
    long = read_answer(outcome({"cue_changed": True, "same_scene": True, "verdict": "picture-destroyed",
                                "reason": "w " * 300}))
    assert len(long.reason) == 200 and long.reason.endswith("…")


# -- the selection with the check -----------------------------------------------------------------------------
class FakeControl:
    """The reference control's interface with given control effects per candidate (a real rule decides)."""

    available, why_off = True, None

    def __init__(self, effects: dict[int, float]) -> None:
        self.effects = effects

    def not_run(self, why):
        return ControlReading(ran=False, why_not=why)

    def __call__(self, j, c):
        e = self.effects[j]
        return ControlReading(ran=True, passed=control_passes(c.cei, e, 5.0), query_cei=c.cei, control_effect=e,
                              n_refs=2, rises=[e, e])


class VerdictMLLM:
    """Answers the semantic prompt with a scripted verdict per hypothesis (`answers`: hypothesis -> verdict, or
    "garbage", or "raise"); records the hypotheses it was asked about."""

    from nemo_desktop.core.models.protocols import ModelInfo

    info = ModelInfo("test-double:verdict-mllm", "test-double", "1")

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def chat(self, messages, **kw):
        text = "\n".join(p for m in messages for p in m.content if isinstance(p, str))
        images = [p for m in messages for p in m.content if isinstance(p, Image.Image)]
        assert len(images) == 2  # the original and the edited image
        hyp = next(h for h in self.answers if f"Misclassification:** {h}\n" in text)
        self.asked.append(hyp)
        verdict = self.answers[hyp]
        if verdict == "raise":
            raise ConnectionError("endpoint unreachable")
        if verdict == "garbage":
            return "I like both pictures."
        valid = verdict == "tests-the-hypothesis"
        return json.dumps({"cue_changed": valid, "same_scene": True, "verdict": verdict,
                           "reason": f"said about {hyp}"})

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


def cand(cei, dist=0.1, structure=0.99):
    return Candidate(hypothesis=f"h{cei:g}", intervention_kind="image", intervention=f"edit {cei:g}", cei=cei,
                     edit_distance=dist, edit_distance_metric="1-ssim", edit_structure=structure)


def semantic_check(mllm, n, units=None):
    img = Image.new("RGB", (8, 8), "white")
    edited = {j: Image.new("RGB", (8, 8), (j * 30, 0, 0)) for j in range(n)}
    sample = SampleInfo("q.png", "abc", 3, "three", 8, "eight", 0.1, 0.9)
    return SemanticCheck(null_context(), units or UnitCache(None), mllm, load_prompt("json_repair"), img, "abc",
                         edited, sample)


def test_a_vetoed_edit_is_passed_over_in_words_and_the_next_candidate_is_selected():
    pasted, true = cand(95.0), cand(70.0)
    mllm = VerdictMLLM({"h95": "true-class-painted-in", "h70": "tests-the-hypothesis"})
    check = semantic_check(mllm, 2)
    notes: list[str] = []
    assert select([pasted, true], "evidence", 0.6, notes, "hypothesis", control=FakeControl({0: 1.0, 1: 1.0}),
                  semantic=check) == 1
    assert mllm.asked == ["h95", "h70"]  # lazily, from the largest CEI down, after the control passed
    assert pasted.edit_control["passed"] and pasted.edit_semantic["ran"] and not pasted.edit_semantic["valid"]
    assert pasted.edit_semantic["verdict"] == "true-class-painted-in"
    assert pasted.edit_verdict_reason.startswith(
        'semantic check by the MLLM: the true class was painted or pasted in ("said about h95") -> does not test the '
        "hypothesis, overruling the reference control: the same edit raised P(true) by at most +1.0 points")
    assert true.edit_verdict_reason.startswith("reference control") and true.edit_verdict_reason.endswith(
        '; semantic check by the MLLM: the edit changed what the hypothesis names and kept the picture ("said about '
        'h70") -> tests the hypothesis')
    assert any(n.startswith("Hypothesis #1 (CEI +95.0) passed the other tests, but the MLLM's semantic check of its "
                            "edited image says the true class was painted or pasted in") for n in check.notes)
    record = check.record([pasted, true])
    assert record["enabled"] and record["ran"] == [0, 1] and record["vetoed"] == [0]
    assert record["prompt"].startswith("scitx_edit_semantic/v1+")


def test_the_check_never_rescues_an_edit_the_other_tests_ruled_out_and_is_not_spent_on_it():
    failed, destroyed, unchanged, low = cand(95.0), cand(90.0, structure=0.2), cand(80.0, dist=0.0), cand(4.0)
    mllm = VerdictMLLM({"h95": "tests-the-hypothesis", "h90": "tests-the-hypothesis",
                        "h80": "tests-the-hypothesis", "h4": "tests-the-hypothesis"})
    check = semantic_check(mllm, 4)

    class Partial(FakeControl):
        def __call__(self, j, c):
            if j == 1:
                return self.not_run("editing a reference failed: out of memory")
            return super().__call__(j, c)

    cands = [failed, destroyed, unchanged, low]  # the control fails the first and cannot run on the second
    assert select(cands, "evidence", 0.6, [], "hypothesis", control=Partial({0: 95.0}), semantic=check) is None
    assert mllm.asked == []  # a failed control, a destroyed structure, "no change", a CEI within the floor
    assert all(c.edit_semantic is None for c in cands)
    assert all("semantic check" not in c.edit_verdict_reason for c in cands)


def test_an_unreadable_or_failed_answer_is_not_run_in_words_and_the_selection_is_as_without_it():
    for answer in ("garbage", "raise"):
        a, b = cand(95.0), cand(70.0)
        mllm = VerdictMLLM({"h95": answer, "h70": "tests-the-hypothesis"})
        check = semantic_check(mllm, 2)
        notes: list[str] = []
        assert select([a, b], "evidence", 0.6, notes, "hypothesis", control=FakeControl({0: 1.0, 1: 1.0}),
                      semantic=check) == 0
        asked = ["h95", "h95"] if answer == "garbage" else ["h95"]  # garbage: the answer and one repair turn
        assert mllm.asked == asked and not a.edit_semantic["ran"] and a.edit_semantic["valid"] is None
        why = ("the MLLM's answer could not be read: Unreadable reply, also after one repair request"
               if answer == "garbage" else "the MLLM failed: Unexpected error: endpoint unreachable")
        assert f"; semantic check not run ({why}" in a.edit_verdict_reason
        assert a.edit_verdict_reason.startswith("reference control")  # the control decided
        assert any("did not run" in n and "the other tests decided" in n for n in check.notes)
        assert check.transient is (answer == "raise")  # a failed call: the result is incomplete, retried


def test_answers_are_cached_but_failed_calls_are_asked_again(store):
    units = UnitCache(store)
    mllm = VerdictMLLM({"h95": "object-replaced"})
    c = cand(95.0)
    assert not semantic_check(mllm, 1, units).passes(0, c)
    again = cand(95.0)
    assert not semantic_check(mllm, 1, units).passes(0, again)
    assert mllm.asked == ["h95"] and again.edit_semantic == c.edit_semantic
    down = VerdictMLLM({"h96": "raise"})
    for _ in range(2):
        assert semantic_check(down, 1, UnitCache(store)).passes(0, cand(96.0))  # not run: the others decide
    assert len(down.asked) == 2


# -- in the pipeline --------------------------------------------------------------------------------------------
class SneakyEditor(DigitsEditor):
    """Asked to thicken the strokes, recolours the digit red instead (the ink of the threes the references show):
    the same image as the honest recolour, so the same CEI, and the first candidate wins the tie. The structure is
    kept; with the reference control off, only the semantic check sees that the edit did not do what its
    hypothesis names."""

    def edit(self, image, instruction, **kw):
        return super().edit(image, "Recolour the digit red" if "thicker" in instruction.lower() else instruction,
                            **kw)


@pytest.fixture
def index(digits_classifier, reference_folder, store):
    return build_index(reference_folder, digits_classifier, store)


def run(classifier, store, index, mllm, **cfg):
    config = SciTXConfig(**{"k": 2, "m": 3, "edit_control_references": 0, **cfg})
    return SciTXPipeline(classifier, mllm, SneakyEditor(), store=store, reference=index, config=config)


def test_off_by_default_and_the_key_is_as_before(digits_classifier, blue_three, store, index):
    assert SciTXConfig().edit_semantic_check is False
    assert "edit_semantic_check" not in SciTXConfig().as_dict()
    assert SciTXConfig(edit_semantic_check=True).as_dict()["edit_semantic_check"] is True
    pipe = run(digits_classifier, store, index, ScriptedDigitsMLLM())
    off = pipe(blue_three, "three")
    assert off.manifest["prompts"] == pipe.prompts.versions()  # no semantic prompt in the key when off
    assert "edit_semantic_check" not in off.manifest["config"]
    assert off.manifest["edit_check"]["semantic"] == {"enabled": False, "why_not": "off: edit_semantic_check is false"}
    assert all(c.edit_semantic is None for c in off.candidates)
    assert "thicker" in off.candidates[off.selected_index].intervention.lower()  # the sneaky edit wins without it
    on = run(digits_classifier, store, index, ScriptedDigitsMLLM(), edit_semantic_check=True)(blue_three, "three")
    assert on.result_key != off.result_key
    assert on.manifest["prompts"]["scitx_edit_semantic"].startswith("scitx_edit_semantic/v1+")


def test_the_pasted_in_true_class_cue_is_vetoed_and_said_everywhere(digits_classifier, blue_three, store, index):
    from nemo_desktop.cli.commands.explain import format_result
    from nemo_desktop.core.reports import build_single_report, render_html

    mllm = SemanticDigitsMLLM()
    result = run(digits_classifier, store, index, mllm, edit_semantic_check=True)(blue_three, "three")
    sneaky = next(j for j, c in enumerate(result.candidates) if "thicker" in c.intervention.lower())
    chosen = result.candidates[result.selected_index]
    assert "red" in chosen.intervention.lower() and chosen.edit_semantic["valid"]  # the true cause
    s = result.candidates[sneaky]
    assert s.cei == chosen.cei and sneaky < result.selected_index  # it had won the tie
    assert s.edit_semantic["verdict"] == "true-class-painted-in"
    words = ('semantic check by the MLLM: the true class was painted or pasted in ("The digit was recoloured from '
             'blue to red; the hypothesis is about its strokes.") -> does not test the hypothesis, overruling the '
             "structure test")
    assert s.edit_verdict_reason.startswith(words)
    assert mllm.semantic_calls == 2
    record = result.manifest["edit_check"]["semantic"]
    assert record["enabled"] and record["ran"] == sorted([sneaky, result.selected_index])
    assert record["vetoed"] == [sneaky] and record["readings"][sneaky] == s.edit_semantic
    assert any("passed the other tests, but the MLLM's semantic check" in n for n in result.notes)
    stored = ExplanationResult.from_dict(store.get(result.result_key).payload)
    assert stored.candidates[sneaky].edit_semantic == s.edit_semantic
    assert f"verdict: {words}" in format_result(result)
    html = render_html(build_single_report(result.result_key, store))
    assert html_escape(words, quote=True) in html
    # the same run again is answered from the store, the MLLM not asked
    again = SemanticDigitsMLLM()
    assert run(digits_classifier, store, index, again, edit_semantic_check=True)(blue_three, "three").result_key \
        == result.result_key and again.semantic_calls == 0


def test_model_text_in_the_reason_is_escaped_in_the_report(digits_classifier, blue_three, store, index):
    from nemo_desktop.core.reports import build_single_report, render_html

    result = run(digits_classifier, store, index, SemanticDigitsMLLM("hostile"),
                 edit_semantic_check=True)(blue_three, "three")
    reason = result.candidates[0].edit_verdict_reason
    assert '("<script>alert(1)</script> pasted [31m in")' in reason  # control characters dropped
    html = render_html(build_single_report(result.result_key, store))
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; pasted" in html


def test_an_mllm_that_cannot_answer_leaves_the_selection_as_without_the_check(digits_classifier, blue_three, store,
                                                                               index):
    off = run(digits_classifier, store, index, ScriptedDigitsMLLM())(blue_three, "three")
    for mode in ("garbage", "raise"):
        on = run(digits_classifier, store, index, SemanticDigitsMLLM(mode),
                 edit_semantic_check=True)(blue_three, "three")
        assert on.selected_index == off.selected_index
        c = on.candidates[on.selected_index]
        assert not c.edit_semantic["ran"] and "; semantic check not run (the MLLM" in c.edit_verdict_reason
        assert on.manifest["edit_check"]["semantic"]["ran"] == []
        assert on.manifest["complete"] is (mode == "garbage")  # a failed call is retried by a re-run


def test_the_option_is_derived_for_the_cli_and_the_form():
    from nemo_desktop.core.registry.params import config_params

    p = next(p for p in config_params(SciTXConfig) if p.name == "edit_semantic_check")
    assert p.kind == "bool" and p.label == "Semantic check of edits" and "vetoes" in p.help
