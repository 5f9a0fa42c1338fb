"""Units of work cached by a key of everything that determines them: in memory for one run, and in the
results store (when one is given) across runs, so a cancelled or killed run resumes without repeating
a measurement or an LLM call. Store kinds: see `KINDS`."""
from __future__ import annotations

from typing import Any

from ...store.keys import result_key

KIND_CONDITION = "model-diff-condition"  # one condition's measured difference
KIND_LLM = "model-diff-llm"  # one explainer reply (summarize / update / explore)
KIND_ANSWER = "model-diff-answer"  # one evaluator answer (explanation text x question)
KIND_ITERATION = "model-diff-iteration"  # one iteration record of Optimization
KIND_RESULT = "model-diff-result"  # the final ModelDiffResult
KINDS = (KIND_CONDITION, KIND_LLM, KIND_ANSWER, KIND_ITERATION, KIND_RESULT)


class UnitMemo:
    def __init__(self, store: Any = None) -> None:
        self.store = store
        self._memory: dict[str, dict] = {}
        self.hits = 0
        self.computed = 0

    @staticmethod
    def key(kind: str, **parts: Any) -> str:
        return result_key(kind, **parts)

    def get(self, key: str) -> dict | None:
        hit = self._memory.get(key)
        if hit is None and self.store is not None:
            stored = self.store.get(key)
            hit = None if stored is None else stored.payload
            if hit is not None:
                self._memory[key] = hit
        if hit is not None:
            self.hits += 1
        return hit

    def put(self, key: str, kind: str, payload: dict, artifacts: dict[str, Any] | None = None) -> dict:
        self.computed += 1
        self._memory[key] = payload
        if self.store is not None:
            self.store.put(key, kind, payload, artifacts=artifacts)
        return payload
