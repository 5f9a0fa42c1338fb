"""Scores an explanation with the evaluator LLM (Eq. 3 answers -> Completeness, Density, Token Length).

Each (prompt text) is asked once at temperature 0: answers are cached per rendered prompt in the run memo
and the results store, and the uncached ones of a scoring pass go out through `chat_batch` in chunks, so
rescoring the beam on a grown condition set only asks about the new conditions.
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

from ...base.job_context import JobContext
from ...models.protocols import ChatMessage
from .cache import KIND_ANSWER, UnitMemo
from .differences import ConditionMeasurement
from .metrics import TokenCounter, completeness, drop_words, parse_answer
from .prompts import ModelDiffPrompts
from .result import ExplanationScore


def model_part(info: Any) -> dict[str, Any]:
    return {"id": info.model_id, "family": info.family, "revision": info.revision}


class ExplanationScorer:
    def __init__(self, evaluator: Any, prompts: ModelDiffPrompts, task_description: str, memo: UnitMemo,
                 tokens: TokenCounter, *, drop_ratio: float = 0.25, density_repeats: int = 1, seed: int = 0,
                 batch_size: int = 16, max_new_tokens: int = 16) -> None:
        self.evaluator, self.prompts, self.task = evaluator, prompts, task_description
        self.memo, self.tokens = memo, tokens
        self.drop_ratio, self.repeats, self.seed = float(drop_ratio), int(density_repeats), int(seed)
        self.batch_size, self.max_new_tokens = max(1, int(batch_size)), int(max_new_tokens)
        self.calls = 0  # evaluator conversations actually sent

    def _key(self, prompt: str) -> str:
        return self.memo.key(KIND_ANSWER, evaluator=model_part(self.evaluator.info),
                             prompt_sha256=hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
                             max_new_tokens=self.max_new_tokens)

    def answers(self, items: Sequence[tuple[str, ConditionMeasurement]], ctx: JobContext) -> list[int | None]:
        """Diff_LLM for each (explanation text, condition); None = unreadable reply."""
        prompts = [self.prompts.render_evaluate(self.task, text, m.condition) for text, m in items]
        keys = [self._key(p) for p in prompts]
        replies: dict[str, str] = {}
        todo: dict[str, str] = {}
        for k, p in zip(keys, prompts):
            hit = None if k in replies or k in todo else self.memo.get(k)
            if hit is not None:
                replies[k] = hit["reply"]
            elif k not in replies:
                todo[k] = p
        todo = list(todo.items())
        for start in range(0, len(todo), self.batch_size):
            ctx.check_cancelled()
            chunk = todo[start:start + self.batch_size]
            out = self.evaluator.chat_batch([[ChatMessage.user(p)] for _, p in chunk],
                                            max_new_tokens=self.max_new_tokens, temperature=0.0)
            self.calls += len(chunk)
            for (k, _), reply in zip(chunk, out):
                replies[k] = str(reply)
                self.memo.put(k, KIND_ANSWER, {"reply": str(reply)})
        return [parse_answer(replies[k]) for k in keys]

    def score(self, text: str, measurements: Sequence[ConditionMeasurement], ctx: JobContext, *,
              density: bool = True) -> ExplanationScore:
        deltas = [m.delta for m in measurements]
        plain = self.answers([(text, m) for m in measurements], ctx)
        comp = completeness(deltas, [a or 0 for a in plain])
        score = ExplanationScore(completeness=comp.value, completeness_undefined=comp.undefined, n=comp.n,
                                 tokens=self.tokens.count(text), unparsed=sum(a is None for a in plain))
        if density:
            values, undefined, unparsed = [], False, 0
            for r in range(self.repeats):
                dropped = [(drop_words(text, ratio=self.drop_ratio, seed=self.seed, condition_id=m.condition.id,
                                       repeat=r), m) for m in measurements]
                ans = self.answers(dropped, ctx)
                c = completeness(deltas, [a or 0 for a in ans])
                values.append(comp.value - c.value)
                undefined |= c.undefined
                unparsed += sum(a is None for a in ans)
            score.density = sum(values) / len(values)
            score.density_undefined = undefined
            score.unparsed_dropped = unparsed
        return score
