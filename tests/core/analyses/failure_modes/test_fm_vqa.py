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
    def __init__(self, name="test-double:ink-vqa", always=None):
        self.info = ModelInfo(name, "test-double", "1")
        self.always, self.calls = always, 0

    def chat_batch(self, conversations, *, max_new_tokens=512, temperature=0.0, seed=None):
        out = []
        for conv in conversations:
            image, question = conv[0].content
            self.calls += 1
            if self.always:
                out.append(self.always)
                continue
            described = re.search(r'"([^"]*)"', question).group(1)
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
    vqa = VqaRelevance([looker], store)
    assert vqa.cost(40, 6) == 240 and "Reply simply with 'yes' or 'no'" in vqa.question("x")
    m = vqa.matrix(paths, sents)
    assert looker.calls == 240
    assert np.array_equal(m, AttributeRelevance(ink_manifest).matrix(paths, sents))
    assert np.array_equal(VqaRelevance([looker], store).matrix(paths, sents), m) and looker.calls == 240  # cached
    yes_man, no_man = InkLookingMLLM("test-double:yes", "yes"), InkLookingMLLM("test-double:no", "No way")
    assert np.array_equal(VqaRelevance([looker, yes_man], store).matrix(paths, sents), m)
    nay = VqaRelevance([looker, no_man], store)
    assert not nay.matrix(paths, sents).any() and nay.unclear == 0
    unsure = VqaRelevance([InkLookingMLLM("test-double:unsure", "Perhaps")], store)
    assert not unsure.matrix(paths[:2], sents).any() and unsure.unclear == 12


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
