"""Image-sentence relevance by visual question answering (paper App. C.3), for the evaluation only.

Every (image, sentence) pair becomes a yes/no question (nemo_desktop/resources/prompts/failure_modes_vqa.v1.txt) to each
configured MLLM; with several MLLMs the answers are combined with AND (the paper's "OFA & LLaVA", the most
accurate combination in its Tab. 4). An answer counts as yes only when its first word is "yes"; anything
else is no, and unclear replies are counted. Answers are cached in the results store per (image content
hash, MLLM id + revision, prompt version), one record per image holding its sentences' answers, so a
re-run or a larger sentence set asks only what is new. Cost: images x sentences x MLLMs calls
(`cost()`), which is why the CLI/GUI should show it before running; cancellation is checked between images.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from ...errors import ConfigError
from ...jobs import JobContext
from ...methods.prompts import load_prompt
from ...models.protocols import ChatMessage
from ...store.keys import content_hash, result_key
from .sentences import Sentence

CACHE_KIND = "failure-modes-vqa"
_FIRST_WORD = re.compile(r"[a-z]+")


def parse_yes_no(reply: str | None) -> bool | None:
    """True for yes, False for no, None when the first word is neither."""
    m = _FIRST_WORD.search((reply or "").lower())
    return {"yes": True, "no": False}.get(m.group(0)) if m else None


class VqaRelevance:
    def __init__(self, mllms: Sequence[Any], store: Any = None, *, seed: int = 0, max_new_tokens: int = 4,
                 ctx: JobContext | None = None) -> None:
        if not mllms:
            raise ConfigError("VQA relevance needs at least one multimodal LLM.")
        self.mllms = list(mllms)
        self.store = store
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.ctx = ctx or JobContext()
        self.prompt = load_prompt("failure_modes_vqa")
        self.unclear = 0  # replies that were neither yes nor no (counted as no)

    def identity(self) -> dict[str, Any]:
        return {"source": "vqa", "prompt": self.prompt.version, "combine": "and",
                "mllms": [{"id": m.info.model_id, "revision": m.info.revision} for m in self.mllms]}

    def cost(self, n_images: int, n_sentences: int) -> int:
        """Model calls a full matrix needs when nothing is cached."""
        return n_images * n_sentences * len(self.mllms)

    def question(self, sentence: str) -> str:
        return self.prompt.render(sentence=sentence)

    def matrix(self, paths: Sequence[str], sentences: Sequence[Sentence]) -> np.ndarray:
        from ...images import load_image

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
