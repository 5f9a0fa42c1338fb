"""The explainer LLM's replies (summarize, update, explore), cached by everything that determines them.

Generation runs at temperature 1.0 (seed A.4) with a seed derived from the run seed and the unit's place in
the run; the reply is cached under (model, prompt text, temperature, seed, max tokens), so a resumed run gets
exactly the replies of the interrupted one even from endpoints that ignore seeds.
"""
from __future__ import annotations

import hashlib
from typing import Any

from ...models.protocols import ChatMessage
from .cache import KIND_LLM, UnitMemo
from .scoring import model_part


def derive_seed(seed: int, *parts: Any) -> int:
    digest = hashlib.sha256("\x00".join(str(p) for p in (seed, *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class ExplainerLLM:
    def __init__(self, llm: Any, memo: UnitMemo, *, temperature: float = 1.0, max_new_tokens: int = 512) -> None:
        self.llm, self.memo = llm, memo
        self.temperature, self.max_new_tokens = float(temperature), int(max_new_tokens)
        self.calls = 0

    def ask(self, prompt: str, seed: int) -> str:
        key = self.memo.key(KIND_LLM, llm=model_part(self.llm.info),
                            prompt_sha256=hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
                            temperature=self.temperature, seed=int(seed), max_new_tokens=self.max_new_tokens)
        hit = self.memo.get(key)
        if hit is not None:
            return hit["reply"]
        reply = self.llm.chat([ChatMessage.user(prompt)], max_new_tokens=self.max_new_tokens,
                              temperature=self.temperature, seed=int(seed))
        self.calls += 1
        self.memo.put(key, KIND_LLM, {"reply": str(reply)})
        return str(reply)
