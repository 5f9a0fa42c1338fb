"""Image-sentence relevance by visual question answering (paper App. C.3), for the evaluation only.

Every (image, sentence) pair becomes a yes/no question to each configured MLLM. The question is, by default
(`question="per-sentence"`), the paper's: the sentence's own question ("Was the image taken at night?") written once
by an LLM (the first MLLM, text only; vqa_questions.py), followed by the paper's "Reply simply with 'yes' or 'no'"
(prompts/failure_modes_vqa_ask.v1.txt). `question="template"` asks one fixed question that quotes the sentence
(prompts/failure_modes_vqa.v1.txt) and needs no writer. The mode, the writer and the prompts are in `identity()`
(the result key), and `details()` gives the questions asked. With several MLLMs the answers are combined with AND
(the paper's "OFA & LLaVA", the most accurate combination in its Tab. 4). An answer counts as yes only when its
first word is "yes"; anything else is no, and unclear replies are counted. Answers are cached in the results store
per (image content hash, MLLM id + revision, prompt version), one record per image holding its sentences' answers,
so a re-run or a larger sentence set asks only what is new. Cost: images x sentences x MLLMs calls (`cost()`), which
is why the CLI/GUI should show it before running; cancellation is checked between images.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from ...methods.prompts import load_prompt
from ...models.protocols import ChatMessage
from ...store.keys import content_hash, result_key
from .sentences import Sentence
from .vqa_questions import QuestionWriter

QUESTION_MODES = ("per-sentence", "template")

CACHE_KIND = "failure-modes-vqa"
_FIRST_WORD = re.compile(r"[a-z]+")


def parse_yes_no(reply: str | None) -> bool | None:
    """True for yes, False for no, None when the first word is neither."""
    m = _FIRST_WORD.search((reply or "").lower())
    return {"yes": True, "no": False}.get(m.group(0)) if m else None


class VqaRelevance:
    def __init__(self, mllms: Sequence[Any], store: Any = None, *, seed: int = 0, max_new_tokens: int = 4,
                 ctx: JobContext | None = None, question: str = "per-sentence", writer: Any = None) -> None:
        if not mllms:
            raise ConfigError("VQA relevance needs at least one multimodal LLM.")
        if question not in QUESTION_MODES:
            raise ConfigError(f"Unknown VQA question mode '{question}'.",
                              hint=f"Use one of: {', '.join(QUESTION_MODES)}.")
        self.mllms = list(mllms)
        self.store = store
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.ctx = ctx or JobContext()
        self.mode = question
        self.template = load_prompt("failure_modes_vqa")
        self.ask = load_prompt("failure_modes_vqa_ask")
        self.prompt = self.template if question == "template" else self.ask  # the prompt of the asked text
        self.writer = QuestionWriter(writer or self.mllms[0], store, seed=seed) if question == "per-sentence" else None
        self.questions: dict[str, str] = {}  # sentence -> the question asked (without the reply instruction)
        self.fallbacks: list[str] = []  # per-sentence mode: sentences asked with the template (no readable question)
        self.unclear = 0  # replies that were neither yes nor no (counted as no)

    def identity(self) -> dict[str, Any]:
        return {"source": "vqa", "question": self.mode, "prompt": self.prompt.version, "combine": "and",
                "question_writer": self.writer.identity() if self.writer is not None else None,
                "mllms": [{"id": m.info.model_id, "revision": m.info.revision} for m in self.mllms]}

    def details(self) -> dict[str, Any]:
        """What the run asked: each sentence's question, and the sentences that fell back to the template."""
        return {"questions": dict(self.questions), "question_fallbacks": list(self.fallbacks),
                "unclear_replies": self.unclear}

    def cost(self, n_images: int, n_sentences: int) -> int:
        """Model calls a full matrix needs when nothing is cached."""
        return n_images * n_sentences * len(self.mllms)

    def question(self, sentence: str) -> str:
        """The text asked about an image for this sentence (per-sentence mode: after `prepare`)."""
        if self.mode == "per-sentence" and self.questions.get(sentence):
            return self.ask.render(question=self.questions[sentence])
        return self.template.render(sentence=sentence)

    def prepare(self, sentences: Sequence[str]) -> None:
        """Per-sentence mode: have each sentence's question written (once; cached in the store)."""
        if self.writer is None:
            return
        todo = [s for s in dict.fromkeys(sentences) if s not in self.questions and s not in self.fallbacks]
        if not todo:
            return
        self.ctx.progress("Writing the yes/no questions", 0, len(todo))
        written, failed = self.writer.questions(todo)
        self.questions.update({s: q for s, q in written.items() if q})
        self.fallbacks += failed
        self.ctx.progress("Writing the yes/no questions", len(todo), len(todo))

    def matrix(self, paths: Sequence[str], sentences: Sequence[Sentence]) -> np.ndarray:
        from ...base.images import load_image

        self.prepare([s.text for s in sentences])
        questions = [self.question(s.text) for s in sentences]
        out = np.ones((len(paths), len(sentences)), bool)
        for i, path in enumerate(self.ctx.track(list(paths), "Asking about images")):
            sha = content_hash(str(path))
            image = None
            for mllm in self.mllms:
                key = result_key(CACHE_KIND, image=sha, model={"id": mllm.info.model_id,
                                                                "revision": mllm.info.revision},
                                 prompt=self.prompt.version, seed=self.seed)
                rec = self.store.get(key) if self.store is not None else None
                answers = dict(rec.payload["answers"]) if rec is not None else {}
                todo = [q for q in dict.fromkeys(questions) if q not in answers]
                if todo:
                    image = image if image is not None else load_image(str(path))
                    replies = mllm.chat_batch([[ChatMessage.user(image, q)] for q in todo],
                                              max_new_tokens=self.max_new_tokens, temperature=0.0, seed=self.seed)
                    for q, r in zip(todo, replies):
                        answers[q] = parse_yes_no(r)
                    if self.store is not None:
                        self.store.put(key, CACHE_KIND, {"image": sha, "model": mllm.info.model_id,
                                                         "prompt": self.prompt.version, "answers": answers})
                said = np.array([answers[q] is True for q in questions])
                self.unclear += sum(answers[q] is None for q in todo)
                out[i] &= said
        return out
