"""VQA relevance with a looking MLLM double: it measures the image's ink colour (digits_world.dominant_ink)
and says yes when the question's quoted description names that ink; it never sees the manifest."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from digits_world import dominant_ink
from nemo_desktop.core.analyses.failure_modes import (AttributeRelevance, FailureModesConfig, FailureModesPipeline,
                                                      VqaRelevance, load_sentence_sets)
from nemo_desktop.core.analyses.failure_modes.vqa import parse_yes_no
from nemo_desktop.core.models.protocols import ModelInfo

INKS = ("red", "blue", "green", "black", "orange", "purple")


class InkLookingMLLM:
    """Answers about the ink of the image (the quoted description of the template, or the whole per-sentence
    question); as a question writer (text-only `chat`) it turns "a digit drawn in X ink" into "Is the digit drawn
    in X ink?" (or replies `writes` verbatim when given)."""

    def __init__(self, name="test-double:ink-vqa", always=None, writes=None):
        self.info = ModelInfo(name, "test-double", "1")
        self.always, self.writes, self.calls, self.writer_calls = always, writes, 0, 0
        self.asked: list[str] = []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None):
        self.writer_calls += 1
        if self.writes is not None:
            return self.writes
        sentence = re.search(r'Sentence: "([^"]*)"', messages[0].content[0]).group(1)
        return json.dumps({"question": "Is the digit " + sentence.removeprefix("a digit ") + "?"})

    def chat_batch(self, conversations, *, max_new_tokens=512, temperature=0.0, seed=None):
        out = []
        for conv in conversations:
            image, question = conv[0].content
            self.calls += 1
            self.asked.append(question)
            if self.always:
                out.append(self.always)
                continue
            quoted = re.search(r'"([^"]*)"', question)
            described = quoted.group(1) if quoted else question.split("?")[0]
            out.append("Yes." if f" {dominant_ink(image)} " in f" {described} " else "no")
        return out


@pytest.fixture
def ink_sentences(tmp_path):
    path = tmp_path / "inks.json"
    path.write_text(json.dumps({"sentences": [{"text": f"a digit drawn in {i} ink", "requires": {"ink": i}}
                                              for i in INKS]}))
    return path


def test_parse_yes_no():
    assert parse_yes_no("Yes, it was.") is True and parse_yes_no(" no") is False
    assert parse_yes_no("Maybe") is None and parse_yes_no("") is None and parse_yes_no(None) is None


def test_vqa_matches_the_attributes_caches_and_ands(ink_world, ink_manifest, ink_sentences):
    _, index, _, store = ink_world
    paths = [str(p) for p in index.entries.paths[:40]]
    sents = load_sentence_sets([str(ink_sentences)]).sentences
    looker = InkLookingMLLM()
    vqa = VqaRelevance([looker], store, question="template")
    assert vqa.cost(40, 6) == 240 and "Reply simply with 'yes' or 'no'" in vqa.question("x")
    m = vqa.matrix(paths, sents)
    assert looker.calls == 240
    assert np.array_equal(m, AttributeRelevance(ink_manifest).matrix(paths, sents))
    assert np.array_equal(VqaRelevance([looker], store, question="template").matrix(paths, sents), m)
    assert looker.calls == 240  # cached
    yes_man, no_man = InkLookingMLLM("test-double:yes", "yes"), InkLookingMLLM("test-double:no", "No way")
    assert np.array_equal(VqaRelevance([looker, yes_man], store, question="template").matrix(paths, sents), m)
    nay = VqaRelevance([looker, no_man], store, question="template")
    assert not nay.matrix(paths, sents).any() and nay.unclear == 0
    unsure = VqaRelevance([InkLookingMLLM("test-double:unsure", "Perhaps")], store, question="template")
    assert not unsure.matrix(paths[:2], sents).any() and unsure.unclear == 12


def test_per_sentence_questions_are_written_once_cached_asked_and_recorded(ink_world, ink_manifest, ink_sentences):
    _, index, _, store = ink_world
    paths = [str(p) for p in index.entries.paths[:20]]
    sents = load_sentence_sets([str(ink_sentences)]).sentences
    looker = InkLookingMLLM()
    vqa = VqaRelevance([looker], store)  # the paper's per-sentence question is the default
    m = vqa.matrix(paths, sents)
    assert looker.writer_calls == 6  # one question per sentence, not per image
    assert vqa.questions["a digit drawn in red ink"] == "Is the digit drawn in red ink?"
    assert "Is the digit drawn in red ink? Reply simply with 'yes' or 'no'." in looker.asked
    assert not any('"' in q for q in looker.asked)  # the template's quoting question was not asked
    assert np.array_equal(m, AttributeRelevance(ink_manifest).matrix(paths, sents))
    again = InkLookingMLLM()
    VqaRelevance([again], store).matrix(paths, sents)
    assert again.writer_calls == 0 and again.calls == 0  # questions and answers come from the store
    ident = vqa.identity()
    assert ident["question"] == "per-sentence" and ident["question_writer"]["id"] == "test-double:ink-vqa"
    assert VqaRelevance([looker], store, question="template").identity()["question"] == "template"
    assert vqa.details()["questions"]["a digit drawn in blue ink"] == "Is the digit drawn in blue ink?"


def test_an_unreadable_question_falls_back_to_the_template_and_is_recorded(ink_world, ink_sentences):
    _, index, _, store = ink_world
    sents = load_sentence_sets([str(ink_sentences)]).sentences[:2]
    mute = InkLookingMLLM("test-double:mute", writes="I cannot help with that.")
    vqa = VqaRelevance([mute], store)
    vqa.matrix([str(index.entries.paths[0])], sents)
    assert mute.writer_calls == 4  # the ask and one repair turn per sentence
    assert vqa.details()["question_fallbacks"] == [s.text for s in sents]
    assert all('"' in q for q in mute.asked)  # asked with the quoting template instead


def test_the_question_mode_is_a_setting_in_the_key_and_must_match_the_source(ink_world, ink_sentences):
    from nemo_desktop.core.base.errors import ConfigError

    clf, index, embedder, store = ink_world
    sentences = load_sentence_sets([str(ink_sentences)])
    keys = []
    for mode in ("per-sentence", "template"):
        cfg = FailureModesConfig(split="correctness", clusters=5, tau=None, sentence_sets=(str(ink_sentences),),
                                 relevance="vqa", vqa_question=mode)
        vqa = VqaRelevance([InkLookingMLLM()], store, question=mode)
        keys.append(FailureModesPipeline(clf, embedder, store, cfg, vqa).result_key(index, sentences))
    assert keys[0] != keys[1]
    with pytest.raises(ConfigError, match="vqa_question"):
        FailureModesPipeline(clf, embedder, store, cfg, VqaRelevance([InkLookingMLLM()], store))
    with pytest.raises(ConfigError, match="VQA question mode"):
        FailureModesConfig(relevance="vqa", vqa_question="freeform")


def test_pipeline_evaluates_with_vqa(ink_world, ink_sentences):
    clf, index, embedder, store = ink_world
    cfg = FailureModesConfig(split="correctness", clusters=5, tau=None, sentence_sets=(str(ink_sentences),),
                             relevance="vqa")
    vqa = VqaRelevance([InkLookingMLLM()], store)
    result = FailureModesPipeline(clf, embedder, store, cfg, vqa)(index)
    g = result.groups[0]
    assert [result.sentences[i]["text"] for i in g.evaluation["ground_truth"]["hard_sentences"]] == [
        "a digit drawn in blue ink"]
    assert result.manifest["relevance"]["source"] == "vqa"
    assert result.manifest["relevance"]["question"] == "per-sentence"
    assert result.manifest["relevance"]["questions"]["a digit drawn in blue ink"] == "Is the digit drawn in blue ink?"
    assert result.p_at_k["k"] == 10 and result.p_at_k["value"] is not None
