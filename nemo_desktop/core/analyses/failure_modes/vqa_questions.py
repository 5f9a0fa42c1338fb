"""The paper's per-sentence VQA question (App. C.3): each sentence becomes its own yes/no question, e.g. "an image
taken at night" -> "Was the image taken at night?", written once by an LLM and cached.

The writer gets resources/prompts/failure_modes_vqa_question.v1.txt (JSON `question`, greedy
decoding, one repair turn when the reply is unreadable or is not a question). Each question is cached in the
results store (kind "failure-modes-vqa-question") under the sentence, the writer's id and revision, the prompt
version and the seed, so a re-run, and every image, uses the same question and makes no call. A sentence whose
question cannot be read even after the repair turn is asked with the fixed template instead; `fallbacks` lists
those sentences so the result can say so.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...base.errors import MalformedOutputError
from ...methods.parsing import extract_json
from ...methods.prompts import load_prompt
from ...models.protocols import ChatMessage
from ...store.keys import result_key

CACHE_KIND = "failure-modes-vqa-question"
MAX_WORDS = 40


def _question(raw: str | None) -> str:
    q = extract_json(raw, ("question",))["question"]
    if not isinstance(q, str) or not q.strip():
        raise MalformedOutputError('The "question" field is not a non-empty string.', detail=str(raw)[:500])
    q = " ".join(q.split())
    if not q.endswith("?") or len(q.split()) > MAX_WORDS:
        raise MalformedOutputError(f'The "question" field is not one short question ending with "?": {q[:120]!r}.',
                                   detail=str(raw)[:500])
    return q


class QuestionWriter:
    def __init__(self, llm: Any, store: Any = None, *, seed: int = 0) -> None:
        self.llm, self.store, self.seed = llm, store, seed
        self.prompt, self.repair = load_prompt("failure_modes_vqa_question"), load_prompt("json_repair")
        self.calls = 0

    def identity(self) -> dict[str, Any]:
        return {"id": self.llm.info.model_id, "revision": self.llm.info.revision, "prompt": self.prompt.version,
                "repair": self.repair.version}

    def questions(self, sentences: Sequence[str]) -> tuple[dict[str, str | None], list[str]]:
        """sentence -> its question (None when none could be read), and those unreadable sentences."""
        out: dict[str, str | None] = {}
        for s in dict.fromkeys(sentences):
            key = result_key(CACHE_KIND, sentence=s, writer=self.identity(), seed=self.seed)
            rec = self.store.get(key) if self.store is not None else None
            if rec is not None:
                out[s] = rec.payload["question"]
                continue
            q, error = self._ask(s)
            out[s] = q
            if self.store is not None:
                self.store.put(key, CACHE_KIND, {"sentence": s, "question": q, "error": error,
                                                 "writer": self.identity()})
        return out, [s for s, q in out.items() if q is None]

    def _ask(self, sentence: str) -> tuple[str | None, str | None]:
        messages = [ChatMessage.user(self.prompt.render(sentence=sentence))]
        raw = self.llm.chat(messages, max_new_tokens=96, temperature=0.0, seed=self.seed)
        self.calls += 1
        try:
            return _question(raw), None
        except MalformedOutputError as first:
            follow = [*messages, ChatMessage("assistant", [raw or ""]),
                      ChatMessage.user(self.repair.render(error=first.message.rstrip("."), keys='"question"'))]
            raw2 = self.llm.chat(follow, max_new_tokens=96, temperature=0.0, seed=self.seed)
            self.calls += 1
            try:
                return _question(raw2), None
            except MalformedOutputError as second:
                return None, f"Unreadable reply, also after one repair request: {second.message}"
