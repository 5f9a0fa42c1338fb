"""Test doubles for the SciTX pipeline tests (test code, never shipped): wrappers that inject failures
around the digits-world doubles, and a zero-shot classifier double."""
from __future__ import annotations

import numpy as np

from digits_world import CLASS_NAMES, ScriptedDigitsMLLM, dominant_ink
from nemo_desktop.core.models.protocols import ModelInfo


class GarbageForSeedMLLM(ScriptedDigitsMLLM):
    """Answers the hypothesis prompt with garbage when sampled with `bad_seed` (also for the repair turn
    of that conversation); `fixed_by_repair=True` makes the repair turn answer properly."""

    def __init__(self, bad_seed: int, fixed_by_repair: bool = False) -> None:
        super().__init__()
        self.bad_seed = bad_seed
        self.fixed_by_repair = fixed_by_repair

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        is_repair = len(messages) > 1 and messages[-1].role == "user" and any(
            m.role == "assistant" for m in messages)
        if seed == self.bad_seed:
            if is_repair and self.fixed_by_repair:
                return super().chat(messages[:1], max_new_tokens=max_new_tokens, temperature=0.7, seed=seed)
            self.calls.append({"text": "(garbage)", "temperature": temperature, "seed": seed, "repair": is_repair})
            return "lorem ipsum <|im_end|> {{{ the the"
        return super().chat(messages, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)


class SameHypothesisMLLM(ScriptedDigitsMLLM):
    """Always proposes the same hypothesis, however it is sampled (to exercise de-duplication)."""

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        return super().chat(messages, max_new_tokens=max_new_tokens, temperature=0.0, seed=None)


class RaisingMLLM(ScriptedDigitsMLLM):
    """Raises (like an endpoint that is down) for the sampled draw with `bad_seed`."""

    def __init__(self, bad_seed: int) -> None:
        super().__init__()
        self.bad_seed = bad_seed

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        if seed == self.bad_seed:
            raise ConnectionError("endpoint unreachable")
        return super().chat(messages, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)


class FailingEditor:
    """Wraps an editor; raises for instructions containing `bad_word`."""

    def __init__(self, inner, bad_word: str) -> None:
        self.inner, self.bad_word = inner, bad_word
        self.info = inner.info
        self.calls = inner.calls

    def edit(self, image, instruction, **kw):
        if self.bad_word in instruction.lower():
            self.calls.append(instruction)
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.inner.edit(image, instruction, **kw)


class ColourPromptZeroShot:
    """Zero-shot classifier double: scores each class prompt against the image by whether the prompt names
    the image's ink colour, plus a fixed prior that favours 'eight'. Records every class_prompts it gets."""

    zero_shot = True
    info = ModelInfo("test-double:colour-zero-shot", "test-double", "1")

    def __init__(self) -> None:
        self.class_names = list(CLASS_NAMES)
        self.received: list[dict | None] = []
        self.calls = 0

    def class_prompt(self, index: int) -> str:
        return f"a photo of the digit {self.class_names[index]}."

    def predict_proba(self, images, *, class_prompts=None):
        self.calls += 1
        self.received.append(dict(class_prompts) if class_prompts else None)
        rows = []
        for im in images:
            ink = dominant_ink(im)
            logits = np.zeros(len(self.class_names))
            logits[8] = 2.0  # the model's bias
            for i in range(len(self.class_names)):
                prompt = (class_prompts or {}).get(i, self.class_prompt(i))
                if ink in prompt:
                    logits[i] += 4.0
            e = np.exp(logits - logits.max())
            rows.append(e / e.sum())
        return np.asarray(rows, dtype=np.float32)

    def embed(self, images):
        self.calls += 1
        out = np.stack([np.asarray(im.convert("RGB").resize((4, 4))).reshape(-1).astype(np.float32)
                        for im in images])
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def preprocess(self, images):
        raise NotImplementedError("not needed by SciTX")

    def forward_logits(self, pixel_values):
        raise NotImplementedError("not needed by SciTX")


class CutShortMLLM(ScriptedDigitsMLLM):
    """Answers the hypothesis prompt of the draw sampled with `cut_seed` with its JSON cut short (a plain
    `str`, unterminated, as a double or a user's adapter that does not say how a reply ended would), unless
    given at least `whole_at` tokens (None: never). Records each hypothesis call's max_new_tokens."""

    def __init__(self, cut_seed: int, whole_at: int | None = None) -> None:
        super().__init__()
        self.cut_seed, self.whole_at = cut_seed, whole_at
        self.hypothesis_budgets: list[tuple[int | None, int]] = []  # (seed, max_new_tokens)

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        reply = super().chat(messages, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        if "cause_of_error" not in self.calls[-1]["text"]:
            return reply
        self.hypothesis_budgets.append((seed, max_new_tokens))
        if seed == self.cut_seed and (self.whole_at is None or max_new_tokens < self.whole_at):
            return reply[:reply.index('"cause_of_error"') + 40]  # '... "cause_of_error": "The digit is slightly'
        return reply
