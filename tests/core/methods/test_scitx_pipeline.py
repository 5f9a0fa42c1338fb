"""SciTX pipeline behaviour: store reuse, per-candidate failures, missing references, cancel/resume, the
zero-shot path. Uses the digits world (real CNN, scripted MLLM double, real PIL edits)."""
from __future__ import annotations

import pytest
from digits_world import (EIGHT, HYPOTHESES, THREE, DigitsCNNClassifier, DigitsEditor, ScriptedDigitsMLLM,
                          write_reference)
from PIL import Image
from scitx_doubles import (ColourPromptZeroShot, FailingEditor, GarbageForSeedMLLM, RaisingMLLM,
                           SameHypothesisMLLM)

from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.base.errors import ConfigError, JobCancelled, NemoError
from nemo_desktop.core.base.job_context import JobContext, run_job
from nemo_desktop.core.registry.methods import get_method, list_methods
from nemo_desktop.core.base.records import ExplanationResult
from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline

KINDS = ("classification", "embedding", "retrieval", "caption", "hypothesis", "intervention", "edit",
         "explanation")


def counts(store):
    return {k: len(store.find(k)) for k in KINDS}


@pytest.fixture
def index(digits_classifier, reference_folder, store):
    return build_index(reference_folder, digits_classifier, store)


def make(classifier, store, index, mllm=None, editor=None, **cfg):
    return SciTXPipeline(classifier, mllm or ScriptedDigitsMLLM(), editor or DigitsEditor(), store=store,
                         reference=index, config=SciTXConfig(**{"k": 3, "m": 3, **cfg}))


def test_rerun_makes_no_model_calls(digits, blue_three, store, index):
    clf = DigitsCNNClassifier(digits[0])
    first = make(clf, store, index)
    r1 = first(blue_three, "three")
    assert r1.result_key and r1.manifest["complete"] is True
    assert first.mllm.calls and first.editor.calls and clf.calls

    clf2 = DigitsCNNClassifier(digits[0])
    again = make(clf2, store, index)
    r2 = again(blue_three, THREE)  # the label as an index this time
    assert again.mllm.calls == [] and again.editor.calls == [] and clf2.calls == 0
    assert r2.to_dict() == r1.to_dict()

    # Even without the final record, every unit is reused: still no model call.
    store.delete(r1.result_key)
    clf3 = DigitsCNNClassifier(digits[0])
    third = make(clf3, store, index)
    r3 = third(blue_three, "three")
    assert third.mllm.calls == [] and third.editor.calls == [] and clf3.calls == 0
    assert r3.explanation == r1.explanation and r3.cei == pytest.approx(r1.cei)
    assert r3.manifest["units"]["computed"] == 0 and r3.manifest["units"]["reused"] > 10


def test_result_record_and_manifest(digits_classifier, blue_three, store, index):
    pipe = make(digits_classifier, store, index)
    result = pipe(blue_three, "three")
    stored = store.get(result.result_key)
    assert stored.kind == "explanation"
    assert ExplanationResult.from_dict(stored.payload).to_dict() == result.to_dict()
    assert {"input", "edited_0", "edited_1", "edited_2"} <= set(stored.artifacts)
    assert stored.load_image("input").size == Image.open(blue_three).size
    assert stored.load_image("edited_2").size == Image.open(blue_three).size  # edited at the input's size
    assert all(o.thumbnail_artifact in stored.artifacts for o in result.observations)
    m = result.manifest
    assert m["models"]["classifier"]["id"] == "test-double:digits-cnn" and m["models"]["classifier"]["revision"]
    assert m["models"]["mllm"]["family"] == "test-double" and m["models"]["editor"]["id"]
    assert set(m["prompts"]) == {"caption", "hypothesis", "edit", "rewrite", "repair", "hypothesis_similarity"}
    assert m["prompts"]["hypothesis"].startswith("scitx_hypothesis/v1+")
    assert m["config"]["k"] == 3 and m["app_version"] and m["date"]
    assert set(result.timings) >= {"classify", "retrieve", "caption", "hypothesis", "intervention", "edit",
                                   "score", "total"}
    hyp = store.find("hypothesis")[0].payload
    assert hyp["prompt_version"] == m["prompts"]["hypothesis"]


def test_garbage_reply_is_recorded_for_its_candidate(digits_classifier, blue_three, store, index):
    mllm = GarbageForSeedMLLM(bad_seed=1)  # draw 1 (seed 0*1000+1) is unreadable, also after repair
    result = make(digits_classifier, store, index, mllm=mllm)(blue_three, "three")
    bad = result.candidates[1]
    assert bad.error and "repair" in bad.error and bad.cei is None
    assert bad.raw_reply.startswith("lorem ipsum")
    assert [c.get("repair") for c in mllm.calls if c.get("seed") == 1] == [False, True]  # one retry only
    assert result.candidates[0].cei is not None and result.candidates[2].cei is not None
    assert result.explanation == HYPOTHESES[2]
    assert result.manifest["complete"] is True  # an unreadable reply is an outcome, cached like any other


def test_repair_turn_recovers_a_malformed_reply(digits_classifier, blue_three, store, index):
    mllm = GarbageForSeedMLLM(bad_seed=1, fixed_by_repair=True)
    result = make(digits_classifier, store, index, mllm=mllm)(blue_three, "three")
    assert all(c.error is None for c in result.candidates)
    assert result.candidates[1].hypothesis == HYPOTHESES[1]
    stored = [r.payload for r in store.find("hypothesis") if r.payload["draw"] == 1][0]
    assert stored["raw_reply"].startswith("lorem") and stored["repair_reply"]


def test_editor_failure_for_one_candidate(digits, blue_three, store, index):
    clf = DigitsCNNClassifier(digits[0])
    editor = FailingEditor(DigitsEditor(), bad_word="rotate")
    result = make(clf, store, index, editor=editor)(blue_three, "three")
    failed = result.candidates[1]
    assert failed.error.startswith("Editing failed") and "illegal memory access" in failed.error
    assert failed.cei is None and failed.edited_artifact is None
    assert result.candidates[0].cei is not None and result.candidates[2].cei is not None
    assert result.selected_index == 2
    assert result.manifest["complete"] is False and any("re-run retries" in n for n in result.notes)

    # The re-run retries only the failed edit.
    mllm, editor2 = ScriptedDigitsMLLM(), DigitsEditor()
    again = make(DigitsCNNClassifier(digits[0]), store, index, mllm=mllm, editor=editor2)(blue_three, "three")
    assert editor2.calls == ["Rotate the digit slightly"] and mllm.calls == []
    assert again.manifest["complete"] is True and all(c.error is None for c in again.candidates)


def test_mllm_exception_is_recorded_and_retried(digits, blue_three, store, index):
    result = make(DigitsCNNClassifier(digits[0]), store, index, mllm=RaisingMLLM(bad_seed=2))(blue_three, "three")
    assert "endpoint unreachable" in result.candidates[2].error
    assert result.manifest["complete"] is False
    # the cause's draw failed and the other two edits show no evidence (CEI within the noise floor): issue 45,
    # no explanation without evidence
    assert result.selected_index is None and result.explanation is None
    assert any("not beyond the noise floor" in n for n in result.notes), result.notes
    mllm = ScriptedDigitsMLLM()
    again = make(DigitsCNNClassifier(digits[0]), store, index, mllm=mllm)(blue_three, "three")
    assert len([c for c in mllm.calls if "cause_of_error" in c["text"]]) == 1  # only the failed draw
    assert again.explanation == HYPOTHESES[2]


def test_no_reference_of_the_predicted_class(digits, digits_classifier, blue_three, store, tmp_path):
    folder = write_reference(tmp_path / "no_eights", digits, skip_classes=(EIGHT,))
    index = build_index(folder, digits_classifier, store)
    mllm = ScriptedDigitsMLLM()
    result = make(digits_classifier, store, index, mllm=mllm)(blue_three, "three")
    assert not [o for o in result.observations if o.set_name == "B"]
    assert any("predicted class 'eight'" in n for n in result.notes), result.notes
    prompt = next(c["text"] for c in mllm.calls if "cause_of_error" in c["text"])
    assert "(Predicted Label: eight)\n  - (no examples available)" in prompt
    assert result.explanation == HYPOTHESES[2]  # the method continued with Sets A and C


def test_without_reference_index(digits_classifier, blue_three, store):
    result = make(digits_classifier, store, None)(blue_three, "three")
    assert result.observations == [] and any("no reference index" in n for n in result.notes)
    assert result.explanation == HYPOTHESES[2]


def test_cancel_mid_run_then_resume(digits, blue_three, store, index):
    def cancel_at_second_edit(p):
        if p.stage.startswith("Editing image 2/"):
            ctx.cancel_token.cancel()

    ctx = JobContext(on_progress=cancel_at_second_edit)
    editor = DigitsEditor()
    pipe = make(DigitsCNNClassifier(digits[0]), store, index, editor=editor, edit_steps=4)
    outcome = run_job(lambda c: pipe(blue_three, "three", c), ctx)
    assert outcome.status == "cancelled"
    assert editor.calls == ["Make the strokes thicker", "Rotate the digit slightly"]  # stopped inside edit 2
    before = counts(store)
    assert before["explanation"] == 0 and before["edit"] == 1 and before["hypothesis"] == 3
    assert store.check() == []  # no half-written rows, no missing or stray artifact files

    mllm, editor2 = ScriptedDigitsMLLM(), DigitsEditor()
    clf = DigitsCNNClassifier(digits[0])
    result = make(clf, store, index, mllm=mllm, editor=editor2, edit_steps=4)(blue_three, "three")
    # the rest, then the reference control's edits of six references of other classes (issue 45)
    assert mllm.calls == [] and editor2.calls == ["Rotate the digit slightly"] + ["Recolour the digit red"] * 7
    assert result.explanation == HYPOTHESES[2] and result.manifest["complete"]
    after = counts(store)
    n_obs = len({o.image_sha256 for o in result.observations})
    # + the control: six references and their six edits classified, six edits of references; a reference
    # already drawn in red comes back from "recolour red" as it was, and its classification is the same unit
    classified = after.pop("classification")
    assert 4 + 6 < classified <= 4 + 12
    assert after == {"embedding": 1, "retrieval": 1, "caption": n_obs, "hypothesis": 3,
                     "intervention": 3, "edit": 3 + 6, "explanation": 1}
    assert store.check() == []


def test_cancel_before_start_raises_and_writes_nothing(digits_classifier, blue_three, store, index):
    ctx = JobContext()
    ctx.cancel_token.cancel()
    with pytest.raises(JobCancelled):
        make(digits_classifier, store, index)(blue_three, "three", ctx)
    assert sum(counts(store).values()) == 0


def test_progress_stages_and_partials(digits_classifier, blue_three, store, index):
    seen = []
    ctx = JobContext(on_progress=lambda p: seen.append(p.stage))
    make(digits_classifier, store, index)(blue_three, "three", ctx)
    stages = list(dict.fromkeys(seen))
    assert stages[:5] == ["Classifying", "Retrieving observations", "Captioning observations",
                          "Generating hypotheses", "Writing interventions"]
    assert stages[5:8] == ["Editing image 1/3", "Editing image 2/3", "Editing image 3/3"]
    assert stages[8] == "Scoring"
    assert stages[9:] == [f"Reference control {i}/6 of hypothesis 3" for i in range(1, 7)]
    kinds = [p["kind"] for p in ctx.partial_results]
    assert kinds[:2] == ["sample", "observations"] and kinds.count("candidate") == 6


def test_duplicate_hypotheses_are_redrawn_then_flagged(digits_classifier, blue_three, store, index):
    mllm = SameHypothesisMLLM()
    # selection "cei": this test is about the draws; a one-pixel thickening of a 16-px digit can be judged a
    # replaced picture by the structure measure (tests/core/methods/test_known_causes.py covers the rules)
    result = make(digits_classifier, store, index, mllm=mllm, max_extra_draws=2, selection="cei")(blue_three, "three")
    hyp_calls = [c for c in mllm.calls if "cause_of_error" in c["text"]]
    assert len(hyp_calls) == 3 + 2  # M draws plus the two extra draws allowed
    assert result.candidates[0].error is None
    assert all("Duplicate of candidate 1" in c.error for c in result.candidates[1:])
    assert result.selected_index == 0


def test_zero_shot_uses_prompt_intervention_for_the_true_class_only(blue_three, store):
    clf = ColourPromptZeroShot()
    mllm = ScriptedDigitsMLLM()
    pipe = SciTXPipeline(clf, mllm, None, store=store, reference=None, config=SciTXConfig(k=3, m=3))
    result = pipe(blue_three, "three")
    assert result.sample.pred_index == EIGHT
    assert all(c.intervention_kind == "prompt" for c in result.candidates)
    replaced = [r for r in clf.received if r]
    assert len(replaced) == 3 and all(set(r) == {THREE} for r in replaced)
    assert result.candidates[2].intervention == "a photo of a three written in blue ink"
    assert result.selected_index == 2 and result.cei > 0
    rewrite = next(c["text"] for c in mllm.calls if "Original Failed Prompt" in c["text"])
    assert 'Original Failed Prompt: "a photo of the digit three."' in rewrite
    assert result.manifest["models"]["editor"] is None and result.manifest["intervention"] == "prompt"


def test_ordinary_classifier_needs_an_editor(digits_classifier, blue_three):
    pipe = SciTXPipeline(digits_classifier, ScriptedDigitsMLLM(), None)
    with pytest.raises(ConfigError, match="image editor"):
        pipe(blue_three, "three")


def test_unknown_label_suggests_close_matches(digits_classifier, blue_three):
    pipe = SciTXPipeline(digits_classifier, ScriptedDigitsMLLM(), DigitsEditor())
    with pytest.raises(ConfigError) as err:
        pipe(blue_three, "thre")
    assert "'three'" in err.value.hint


def test_correct_prediction_is_refused(digits, digits_classifier, tmp_path):
    from digits_world import render

    model, (x_test, y_test), _ = digits
    img = next(im for x, y in zip(x_test, y_test) if y == EIGHT
               for im in [render(x, "blue")] if digits_classifier.predict_proba([im])[0].argmax() == EIGHT)
    with pytest.raises(NemoError, match="no error to explain"):
        SciTXPipeline(digits_classifier, ScriptedDigitsMLLM(), DigitsEditor())(img, "eight")


def test_without_store_images_are_returned(digits_classifier, blue_three):
    pipe = SciTXPipeline(digits_classifier, ScriptedDigitsMLLM(), DigitsEditor(), config=SciTXConfig(k=0))
    result = pipe(blue_three, "three")
    assert result.result_key is None and result.explanation == HYPOTHESES[2]
    assert {"input", "edited_0", "edited_1", "edited_2"} <= set(pipe.last_artifacts)


def test_registry_knows_scitx():
    assert "scitx" in list_methods()
    entry = get_method("scitx")
    assert entry.factory is SciTXPipeline and entry.config is SciTXConfig and entry.needs_editor
    with pytest.raises(ConfigError) as err:
        get_method("nope")
    assert "scitx" in err.value.hint


def test_reference_index_of_another_classifier_is_refused(digits, digits_classifier, blue_three, store, index):
    other = DigitsCNNClassifier(digits[0])
    other.info = type(other.info)("test-double:another-cnn", "test-double", "x")
    with pytest.raises(ConfigError, match="was built with"):
        make(other, store, index)(blue_three, "three")


def test_unreadable_reference_file_is_left_out_with_a_note(digits, digits_classifier, blue_three, store, tmp_path):
    folder = write_reference(tmp_path / "ref", digits)
    index = build_index(folder, digits_classifier, store)
    from nemo_desktop.core.data.retrieval import retrieve_observations

    q = digits_classifier.embed([Image.open(blue_three).convert("RGB")])[0]
    picked = retrieve_observations(index, q, THREE, EIGHT, k=3, seed=0).observations  # what SciTX will pick
    victim = next(o for o in picked if o.set_name == "A")
    open(victim.image_path, "wb").write(b"not an image")
    result = make(digits_classifier, store, index)(blue_three, "three")
    assert any(victim.image_path in n and "left out" in n for n in result.notes)
    assert sum(1 for o in result.observations if o.caption) == len(result.observations) - 1
    assert result.explanation == HYPOTHESES[2]


# -- observation settings: k per set, pooled K, k_random, the Table 5 ablation's prompt ------------------------
def _hypothesis_prompt(mllm) -> str:
    return next(c["text"] for c in mllm.calls if "cause_of_error" in c["text"])


def _block(prompt: str, heading: str) -> list[str]:
    """The caption lines under one set heading of the rendered A.1 prompt."""
    lines = prompt.split("\n")
    start = next(i for i, line in enumerate(lines) if heading in line) + 1
    out = []
    for line in lines[start:]:
        if not line.startswith("  - "):
            break
        out.append(line)
    return out


@pytest.mark.parametrize("k_random, expected_c", [(None, 2), (0, 0), (4, 4)])
def test_k_random_is_its_own_setting(digits_classifier, blue_three, store, index, k_random, expected_c):
    pipe = make(digits_classifier, store, index, k=2, m=1, k_random=k_random)
    result = pipe(blue_three, "three")
    sets = [o.set_name for o in result.observations]
    assert sets.count("A") == 2 and sets.count("B") == 2 and sets.count("C") == expected_c
    c_lines = _block(_hypothesis_prompt(pipe.mllm), "(Random Examples)")
    if expected_c == 0:  # Algorithm 1: no random observations; the prompt says the set is empty
        assert c_lines == ["  - (no examples available)"]
    else:
        assert len(c_lines) == expected_c
    assert result.manifest["observations"]["k_random"] == expected_c
    assert result.manifest["config"]["k_random"] == k_random
    retrieval = [r.payload for r in store.find("retrieval")]
    assert len(retrieval) == 1  # each k_random value its own unit (a fresh store per test)


def test_k_random_is_in_the_retrieval_key(digits_classifier, blue_three, store, index):
    make(digits_classifier, store, index, k=2, m=1)(blue_three, "three")
    make(digits_classifier, store, index, k=2, m=1, k_random=0)(blue_three, "three")
    assert len(store.find("retrieval")) == 2
    # The key holds the resolved count: k_random = k is today's default, so the stored unit is reused.
    make(digits_classifier, store, index, k=2, m=1, k_random=2)(blue_three, "three")
    assert len(store.find("retrieval")) == 2


def test_pooled_k_takes_the_nearest_of_both_classes(digits_classifier, blue_three, store, index):
    pipe = make(digits_classifier, store, index, k=3, m=1, k_scope="pooled", k_random=0)
    result = pipe(blue_three, "three")
    ab = [o for o in result.observations if o.set_name in "AB"]
    assert len(ab) == 3 and not [o for o in result.observations if o.set_name == "C"]
    assert result.manifest["observations"]["class_relevant_total"] == 3
    with pytest.raises(ConfigError):
        SciTXConfig(k_scope="both")
    with pytest.raises(ConfigError):
        SciTXConfig(k_random=-1)


def test_ablation_never_shows_other_class_neighbours_as_random(digits_classifier, blue_three, store, index):
    # 2 x 8 nearest neighbours of any class: more than the 12 blue eights and threes can fill.
    pipe = make(digits_classifier, store, index, k=8, m=1, k_random=3, class_relevance=False)
    result = pipe(blue_three, "three")
    prompt = _hypothesis_prompt(pipe.mllm)
    assert result.manifest["prompts"]["hypothesis_similarity"] in [r.payload["prompt_version"]
                                                                 for r in store.find("hypothesis")]
    sample = result.sample
    similar = [o for o in result.observations if o.set_name == "S"]
    others = [o for o in similar if o.label_index not in (sample.true_index, sample.pred_index)]
    assert len(similar) == 16 and others
    s_lines = _block(prompt, "Set S** (Similar Examples of Other Classes)")
    assert len(s_lines) == len([o for o in others if o.caption])
    assert all(line.startswith("  - [") for line in s_lines)  # each with its own label
    c_lines = _block(prompt, "(Random Examples)")
    randoms = [o for o in result.observations if o.set_name == "C"]
    assert len(c_lines) == len(randoms) == 3 and not any(line.startswith("  - [") for line in c_lines)
    assert all(o.label_index not in (sample.true_index, sample.pred_index) for o in randoms)


# -- editor resolution ---------------------------------------------------------------------------------------
class PreferredSizeEditor(DigitsEditor):
    """The digits editor double plus a declared preferred working resolution (2x the input, like an editor
    trained above the input's size); records the size each edit was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[tuple[int, int]] = []

    def preferred_size(self, width, height):
        return 2 * width, 2 * height

    def edit(self, image, instruction, *, size=None, **kw):
        self.sizes.append(tuple(size))
        return super().edit(image, instruction, size=size, **kw)


@pytest.mark.parametrize("settings, expected", [({}, "preferred"), ({"edit_resolution": "native"}, "native"),
                                                ({"edit_size": (40, 24)}, "explicit")])
def test_edits_run_at_the_working_size_and_come_back_at_the_input_size(digits_classifier, blue_three, store, index,
                                                                       settings, expected):
    editor = PreferredSizeEditor()
    result = make(digits_classifier, store, index, editor=editor, m=2, **settings)(blue_three, "three")
    w, h = Image.open(blue_three).size
    working = {"preferred": (2 * w, 2 * h), "native": (w, h), "explicit": (40, 24)}[expected]
    assert editor.sizes and set(editor.sizes) == {working}
    edits = store.find("edit")
    assert all(r.load_image("image").size == (w, h) for r in edits)  # resized back to the input
    assert all(r.payload["size"] == list(working) and r.payload["output_size"] == [w, h] for r in edits)
    record = result.manifest["edit"]
    assert record["working_size"] == list(working) and record["output_resized_to"] == [w, h]
    assert record["resolution"] == settings.get("edit_resolution", "preferred")


def test_an_editor_without_a_preferred_size_edits_natively_and_says_so(digits_classifier, blue_three, store, index):
    result = make(digits_classifier, store, index, m=1)(blue_three, "three")
    assert result.manifest["edit"]["working_size"] == list(Image.open(blue_three).size)
    assert "declares no preferred" in result.manifest["edit"]["working_size_from"]
    with pytest.raises(ConfigError):
        SciTXConfig(edit_resolution="huge")


UNBATCHED = {"caption_batch_size": 1, "edit_batch_size": 1, "batch_requests": False}  # one call per unit


def test_batched_captions_and_edits_give_the_same_result(digits, blue_three, store, index, tmp_path):
    """caption_batch_size / edit_batch_size > 1 send the same conversations and edits in fewer calls; with
    deterministic doubles the explanation is the same. At 1 the config's key is the one results had before."""
    from nemo_desktop.core.store import ResultsStore

    class BatchRecordingMLLM(ScriptedDigitsMLLM):
        def __init__(self):
            super().__init__()
            self.batches = []

        def chat_batch(self, conversations, **kw):
            self.batches.append(len(conversations))
            return super().chat_batch(conversations, **kw)

    class BatchingEditor(DigitsEditor):
        def __init__(self):
            super().__init__()
            self.batches = []

        def edit_batch(self, image, instructions, **kw):
            self.batches.append(len(instructions))
            return [self.edit(image, ins, **kw) for ins in instructions]

    # the edit stage's batching; the reference control's edits (one image each) are off here
    one = make(DigitsCNNClassifier(digits[0]), store, index, **UNBATCHED,
               edit_control_references=0)(blue_three, "three")
    assert not set(SciTXConfig(**UNBATCHED).as_dict()) & set(UNBATCHED)  # the old values: the old keys
    assert SciTXConfig(caption_batch_size=4).as_dict()["caption_batch_size"] == 4

    other = ResultsStore.open(db_path=tmp_path / "other" / "results.sqlite")  # a fresh store: nothing cached
    try:
        mllm, editor = BatchRecordingMLLM(), BatchingEditor()
        batched = make(DigitsCNNClassifier(digits[0]), other, index, mllm=mllm, editor=editor,
                       **{**UNBATCHED, "caption_batch_size": 4, "edit_batch_size": 3},
                       edit_control_references=0)(blue_three, "three")
    finally:
        other.close()
    n_captions = sum(1 for o in one.observations if o.caption)
    assert sum(mllm.batches) == n_captions and max(mllm.batches) == min(4, n_captions) > 1
    assert editor.batches and sum(editor.batches) == len(editor.calls) and max(editor.batches) > 1
    assert batched.explanation == one.explanation and batched.cei == pytest.approx(one.cei)
    assert [o.caption for o in batched.observations] == [o.caption for o in one.observations]
    assert [c.prob_true_after for c in batched.candidates] == pytest.approx([c.prob_true_after for c in one.candidates])


def test_edit_batch_is_chosen_from_what_the_editor_says_fits(digits, blue_three, store, index):
    """Issue 40: edit_batch_size 0 (the default) asks the editor before every batch how many edits fit in free
    memory; the first edit runs alone (nothing measured yet), then the rest together. An editor that cannot
    say runs one edit per call."""

    class MeasuringEditor(DigitsEditor):
        def __init__(self):
            super().__init__()
            self.batches, self.asked = [], []

        def edit_batch(self, image, instructions, **kw):
            self.batches.append(len(instructions))
            return [self.edit(image, ins, **kw) for ins in instructions]

        def edit_batch_capacity(self, size):
            self.asked.append(tuple(size))
            return 1 if not self.calls else 8  # the first edit measures the cost of one

    editor = MeasuringEditor()
    result = make(DigitsCNNClassifier(digits[0]), store, index, editor=editor)(blue_three, "three")
    # + the reference control's six edits, one per call (this editor has no edit_images)
    assert result.manifest["complete"] and len(editor.calls) == 3 + 6
    assert editor.batches == [2] and len(editor.asked) == 2  # one alone (edit), then two (edit_batch)
    assert SciTXConfig().as_dict()["edit_batch_size"] == 0  # automatic is part of the key (see README)


def test_an_edit_batch_out_of_memory_is_edited_one_at_a_time(digits, blue_three, store, index):
    """A batch the free-memory estimate let through but that did not fit: the same edits run one at a time, the
    result is complete, nothing is recorded as failed."""
    from nemo_desktop.core.base.errors import OutOfMemoryError

    class TightEditor(DigitsEditor):
        def edit_batch(self, image, instructions, **kw):
            raise OutOfMemoryError("CUDA out of memory while editing.")

        def edit_batch_capacity(self, size):
            return 3

    editor = TightEditor()
    result = make(DigitsCNNClassifier(digits[0]), store, index, editor=editor)(blue_three, "three")
    assert result.manifest["complete"] and len(editor.calls) == 3 + 6  # + the reference control's edits
    assert not any((c.error or "").startswith("Editing failed") for c in result.candidates)
