"""Completeness, Density and Token Length (seed 002 §3, A.1) as pure functions.

- Completeness (Def. 1, Eq. 4): Pearson correlation between Diff_Model and Diff_LLM over the conditions,
  computed once over all of them (as the peer code the seed cites, OpenAI's automated-interpretability
  `correlation_score`). A constant vector makes it undefined: reported as 0.0 with `undefined=True`.
- Density (Def. 2; the seed prints no formula): Completeness(e) - Completeness over conditions where each
  condition c is asked with its own copy of e that has k = floor(0.25 w + 0.5) of its w whitespace words
  removed (order kept). The drop is seeded by (seed, text, condition id, repeat), so it is deterministic and
  every evaluator call is cacheable. Positive: the words carried information; negative: they misled.
- Token Length (A.1): tokens of GPT-5-mini's tokenizer, o200k_base. tiktoken fetches its vocabulary over the
  network; the maintained `bpe-openai` package embeds it and works offline, so it is tried first.
"""
from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

ANSWER_VALUES = {1: 1, 2: -1, 3: 0}  # option number -> Diff_LLM


@dataclass(frozen=True)
class Correlation:
    value: float
    undefined: bool
    n: int


def completeness(diff_model: Sequence[float], diff_llm: Sequence[float]) -> Correlation:
    x = np.asarray(diff_model, dtype=np.float64)
    y = np.asarray(diff_llm, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"completeness: {x.shape} model differences vs {y.shape} answers")
    n = int(x.size)
    if n < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(0.0, True, n)
    r = float(np.corrcoef(x, y)[0, 1])
    if not math.isfinite(r):
        return Correlation(0.0, True, n)
    return Correlation(r, False, n)


_OPTION = re.compile(r"\[\s*([123])\s*\]")
_BARE = re.compile(r"^\W*([123])\W*$")
_MODEL = re.compile(r"\bmodel\s*([ab])\b", re.I)
_CANNOT = re.compile(r"cannot\s+be\s+determined|can\s*not\s+be\s+determined|undetermined", re.I)


def parse_answer(reply: str | None) -> int | None:
    """Diff_LLM from the evaluator's reply: +1 (Model A), -1 (Model B), 0 (Cannot be determined), None when
    unreadable. An explicit option number wins; otherwise a single named choice."""
    if reply is None:
        return None
    text = str(reply).strip().replace("*", "")
    if not text:
        return None
    m = _OPTION.search(text) or _BARE.match(text)
    if m:
        return ANSWER_VALUES[int(m.group(1))]
    if _CANNOT.search(text):
        return 0
    named = {g.lower() for g in _MODEL.findall(text)}
    if len(named) == 1:
        return 1 if named == {"a"} else -1
    m = re.match(r"^\W*([123])\b", text)
    return ANSWER_VALUES[int(m.group(1))] if m else None


def words_to_drop(w: int, ratio: float = 0.25) -> int:
    """k = round-half-up(ratio * w)."""
    return int(math.floor(ratio * w + 0.5))


def drop_words(text: str, *, ratio: float, seed: int, condition_id: str, repeat: int = 0) -> str:
    """The explanation with k of its whitespace words removed at random (order kept), deterministically."""
    words = text.split()
    k = words_to_drop(len(words), ratio)
    if k <= 0:
        return " ".join(words)
    digest = hashlib.sha256(f"{seed}\x00{text}\x00{condition_id}\x00{repeat}".encode("utf-8")).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    removed = set(rng.sample(range(len(words)), k))
    return " ".join(w for i, w in enumerate(words) if i not in removed)


# -- Token Length -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens with o200k_base (the seed's GPT-5-mini tokenizer); `backend` says which library."""

    backend: str
    encoding: str = "o200k_base"

    @property
    def approximate(self) -> bool:
        return self.backend == "words"

    def count(self, text: str) -> int:
        if self.backend == "words":
            return len(text.split())
        return len(_encoder(self.backend, self.encoding).encode(text))

    def manifest(self) -> dict:
        return {"backend": self.backend, "encoding": self.encoding, "approximate": self.approximate}


@lru_cache(maxsize=4)
def _encoder(backend: str, encoding: str):
    if backend == "tiktoken":
        import tiktoken

        return tiktoken.get_encoding(encoding)
    import bpe_openai

    return bpe_openai.get_encoding(encoding)


def default_token_counter(encoding: str = "o200k_base") -> TokenCounter:
    """bpe-openai (vocabulary embedded, offline), else tiktoken (needs its vocabulary file cached or the
    network), else whitespace words, flagged `approximate`."""
    for backend in ("bpe-openai", "tiktoken"):
        try:
            _encoder(backend, encoding)
            return TokenCounter(backend, encoding)
        except Exception:  # noqa: BLE001 - not installed, or no vocabulary offline
            continue
    return TokenCounter("words", encoding)
