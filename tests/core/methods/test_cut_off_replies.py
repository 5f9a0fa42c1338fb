"""Replies cut short are not hypotheses (issue 27 §3), with a scripted double whose reply is plain text: an
unterminated JSON object is asked again once with twice the budget, and if still cut the candidate is
"Reply cut off", not tested, counted in the manifest and the notes, and cached like a parse failure. Uses the
digits world (real CNN, scripted MLLM double, real PIL edits)."""
from __future__ import annotations

import pytest
from digits_world import HYPOTHESES, DigitsEditor
from scitx_doubles import CutShortMLLM

from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline

BUDGET = SciTXConfig().hypothesis_max_new_tokens  # 512


@pytest.fixture
def index(digits_classifier, reference_folder, store):
    return build_index(reference_folder, digits_classifier, store)


def run(classifier, store, index, mllm, editor=None):
    return SciTXPipeline(classifier, mllm, editor or DigitsEditor(), store=store, reference=index,
                         config=SciTXConfig(k=3, m=3))


def test_a_cut_reply_is_asked_again_with_twice_the_budget(digits_classifier, blue_three, store, index):
    mllm = CutShortMLLM(cut_seed=1, whole_at=2 * BUDGET)
    result = run(digits_classifier, store, index, mllm)(blue_three, "three")
    cand = result.candidates[1]
    assert cand.hypothesis == HYPOTHESES[1] and cand.error is None and cand.cei is not None  # not the fragment
    # no repair turn; the M draws go out at once, then the cut one is asked again
    assert mllm.hypothesis_budgets == [(None, BUDGET), (1, BUDGET), (2, BUDGET), (1, 2 * BUDGET)]
    assert "cut off; asked again with 1024 tokens" in cand.raw_reply
    unit = next(u.payload for u in store.find("hypothesis") if u.payload.get("seed") == 1)
    assert unit["retry_max_new_tokens"] == 2 * BUDGET and unit["cut_off_reply"].endswith('"The digit is slightly')
    assert result.manifest["candidate_counts"]["cut_off"] == 0
    assert result.manifest["cut_off_replies"] == {"retries": 1, "retry_budget_factor": 2}


def test_a_reply_still_cut_is_not_tested_and_is_counted(digits_classifier, blue_three, store, index):
    mllm, editor = CutShortMLLM(cut_seed=1), DigitsEditor()
    result = run(digits_classifier, store, index, mllm, editor)(blue_three, "three")
    cut = result.candidates[1]
    assert cut.hypothesis == "" and cut.cei is None and cut.intervention is None
    assert cut.error.startswith("Reply cut off: it stops inside an unterminated JSON object")
    assert "then once more with 1024" in cut.error
    # no repair turn; the M draws go out at once, then the cut one is asked again
    assert mllm.hypothesis_budgets == [(None, BUDGET), (1, BUDGET), (2, BUDGET), (1, 2 * BUDGET)]
    # only the others (+ the reference control's six edits of the selected one's instruction, issue 45)
    assert len(editor.calls) == 2 + 6 and sum("editing prompt" in c["text"] for c in mllm.calls) == 2
    assert result.manifest["candidate_counts"] == {"candidates": 3, "distinct_scored": 2, "duplicates": 0,
                                                   "no_hypothesis": 0, "cut_off": 1, "not_tested": 0}
    assert any("(1 had their reply cut off at the token limit)" in n for n in result.notes), result.notes

    # Deterministic, so cached like a parse failure: the unit is reused, the model is not asked again.
    store.delete(result.result_key)
    again_mllm = CutShortMLLM(cut_seed=1)
    again = run(digits_classifier, store, index, again_mllm)(blue_three, "three")
    assert again_mllm.hypothesis_budgets == [] and again.candidates[1].error == cut.error


def test_a_cached_unit_that_took_a_fragment_is_asked_again(digits_classifier, blue_three, store, index):
    """Units stored before this check have no finish record: whole ones still load as they are; one whose
    hypothesis was read from an unterminated reply is asked again."""
    first = run(digits_classifier, store, index, CutShortMLLM(cut_seed=-1))(blue_three, "three")
    for unit in store.find("hypothesis"):  # rewrite them as the earlier code stored them
        old = {k: v for k, v in unit.payload.items() if k not in ("finish_reason", "completion_tokens")}
        if old["seed"] == 1:
            old["raw_reply"] = '{"cause_of_error": "The digit is sl'
            old["hypothesis"] = "The digit is sl"
        store.put(unit.key, "hypothesis", old)
    store.delete(first.result_key)
    mllm = CutShortMLLM(cut_seed=-1)
    result = run(digits_classifier, store, index, mllm)(blue_three, "three")
    assert mllm.hypothesis_budgets == [(1, BUDGET)]  # only the fragment's draw
    assert [c.hypothesis for c in result.candidates] == [HYPOTHESES[0], HYPOTHESES[1], HYPOTHESES[2]]
