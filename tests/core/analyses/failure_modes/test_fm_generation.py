"""LLM-generated sentence sets with a scripted chat-model double (test code: it answers from a table)."""
from __future__ import annotations

import json

from nemo_desktop.core.analyses.failure_modes import load_sentence_sets
from nemo_desktop.core.analyses.failure_modes.generation import generate_sentences
from nemo_desktop.core.models.protocols import ModelInfo


class ScriptedLLM:
    """Replies by topic (found in the prompt); counts calls; the repair turn gets the second script entry."""

    info = ModelInfo("test-double:scripted-llm", "test-double", "r1")

    def __init__(self, script):
        self.script, self.calls, self.prompts = script, 0, []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None):
        self.calls += 1
        first = messages[0].content[0]
        self.prompts.append(first)
        topic = next(t for t in self.script if f"Topic: {t}" in first)
        replies = self.script[topic]
        return replies[min(len(messages) // 2, len(replies) - 1)]


SCRIPT = {
    "weather": ['{"sentences": ["An image taken in foggy weather.", "an image taken in   foggy weather", '
                '"an image taken in rainy weather", "an image taken in a very very long and winding description of '
                'pajama weather that goes on"]}'],
    "lighting": ["Sure! Here are some: taken at night, taken at dusk",  # unreadable: one repair turn
                 '```json\n{"sentences": ["an image taken at night", "An image taken in rainy weather"]}\n```'],
    "vehicles": ["no idea", "still no idea"],
}


def test_generation_cleans_dedupes_caches_and_writes_a_loadable_set(store, tmp_path):
    llm = ScriptedLLM(SCRIPT)
    gen = generate_sentences(llm, ["weather", "lighting", "vehicles"], per_topic=5, context="street scenes",
                             store=store)
    assert [s["text"] for s in gen.sentences] == ["an image taken in foggy weather", "an image taken in rainy weather",
                                                  "an image taken at night"]
    assert [s["category"] for s in gen.sentences] == ["weather", "weather", "lighting"]
    assert gen.dropped == 3  # a duplicate, an over-long entry, and a duplicate across topics
    assert "vehicles" in gen.errors and "repair" in gen.errors["vehicles"]
    assert llm.calls == 5  # 1 + 2 (repair) + 2 (repair)
    assert "Context: street scenes" in llm.prompts[0] and "Write 5 short" in llm.prompts[0]
    assert gen.prompt_version.startswith("failure_modes_sentences/v1+")
    path = gen.write(tmp_path / "generated.json")
    doc = json.loads(path.read_text())
    assert doc["generator"]["model"]["id"] == "test-double:scripted-llm"
    assert load_sentence_sets([str(path)]).texts == [s["text"] for s in gen.sentences]
    again = generate_sentences(llm, ["weather", "lighting", "vehicles"], per_topic=5, context="street scenes",
                               store=store)
    assert llm.calls == 5 and again.sentences == gen.sentences  # answered from the store
    generate_sentences(llm, ["weather"], per_topic=6, context="street scenes", store=store)
    assert llm.calls == 6  # another count is another question
