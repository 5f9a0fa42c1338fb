"""LLM Match (NEMO paper §4.1.2): does an explanation describe the benchmark's failure factor?

Each judge is any MultimodalLLM (the OpenAI-compatible adapter for hosted GPT / Claude / Gemini endpoints or
a local vLLM, or a local transformers MLLM), asked text-only at temperature 0 (unless its request options say the model
accepts only its default temperature, as OpenAI's reasoning models do) with the versioned prompt
resources/prompts/llm_match_judge.v1.txt and the dataset's criterion
(resources/benchmarks/criteria.json).
It answers 1.0 (full description), 0.5 (partial) or 0.0 (none); several judges are averaged.

A reply that cannot be read as one of the three scores (no score, an ambiguous one, a value such as 0.75 or
2) is answered with a repair turn (resources/prompts/json_repair.v1.txt), up to `max_attempts` replies in
all; then the verdict is recorded as a failure with every raw reply, never given a score. A model that raises
(endpoint down, out of memory) is not a verdict: the exception propagates and nothing is stored, so a re-run
asks again. Verdicts are stored under a key of everything that determines them and reused.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from ..base.errors import ConfigError, MalformedOutputError
from ..methods.parsing import extract_json
from ..methods.prompts import PromptTemplate, load_prompt
from ..models.protocols import ChatMessage, ModelInfo
from ..base.resources import resource_path
from ..results import Record

VERDICT_KIND = "llm-match"
SCORES = (1.0, 0.5, 0.0)
_WORDS = {"full": 1.0, "full description": 1.0, "partial": 0.5, "partial description": 0.5, "none": 0.0,
          "no description": 0.0, "no": 0.0}
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_VALUE = re.compile(rf"^\s*({_NUMBER})(?![\d.eE])\s*(?:(/)\s*({_NUMBER})|(%))?")
_LABELLED = re.compile(rf"\bscore\b[^0-9+\-.\n]{{0,12}}({_NUMBER}\s*(?:/\s*{_NUMBER}|%)?)", re.IGNORECASE)
_MARKUP = re.compile(r"[*_`\"'\s]+")


# ------------------------------------------------------------------------------------------- criteria

@dataclass(frozen=True)
class Criterion:
    """The failure factor a faithful explanation of this dataset's errors should describe."""

    key: str  # "imagenet-r", "objectnet", "imagenet-d", or "custom"
    dataset_name: str
    factor: str

    def sha256(self) -> str:
        return hashlib.sha256(f"{self.key}\0{self.dataset_name}\0{self.factor}".encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def _criteria() -> dict[str, dict]:
    with resource_path("benchmarks", "criteria.json").open(encoding="utf-8") as f:
        return {k: v for k, v in json.load(f).items() if not k.startswith("_")}


def load_criterion(key: str) -> Criterion:
    try:
        c = _criteria()[key]
    except KeyError:
        raise ConfigError(f"No LLM Match criterion for '{key}'.",
                          hint=f"Shipped criteria: {', '.join(sorted(_criteria()))}; give your dataset a "
                               "'criterion' text in the config.") from None
    return Criterion(key, c["dataset_name"], c["factor"])


def custom_criterion(dataset_name: str, factor: str) -> Criterion:
    if not factor or not factor.strip():
        raise ConfigError(f"The dataset '{dataset_name}' needs a non-empty LLM Match criterion.")
    return Criterion("custom", dataset_name, " ".join(factor.split()))


# -------------------------------------------------------------------------------------------- parsing

def parse_judge_score(text: str | None) -> float:
    """1.0, 0.5 or 0.0 from a judge's reply; MalformedOutputError if there is no unambiguous one.

    Read, in order: the `score` field of a JSON object anywhere in the reply (code fences, prose around it,
    Python-style literals); else every 'score: X' in the prose (they must agree); else a reply that is only
    a value. A value is a number, a fraction ('0.5/1', '1/2', '5/10'), a percentage, or full/partial/none.
    A value outside {1.0, 0.5, 0.0} is an error, not rounded or clipped."""
    if text is None or not str(text).strip():
        raise MalformedOutputError("The judge returned an empty reply.")
    text = str(text)
    try:
        obj = extract_json(text, ("score",))
    except MalformedOutputError:
        obj = None
    if obj is not None:
        return coerce_score(obj["score"])
    labelled = [coerce_score(m) for m in _LABELLED.findall(text)]
    if labelled:
        if len(set(labelled)) > 1:
            raise MalformedOutputError(f"The judge's reply gives conflicting scores: "
                                       f"{', '.join(str(s) for s in labelled)}.", detail=_clip(text))
        return labelled[0]
    bare = re.sub(r"^```[A-Za-z]*|```$", "", text.strip()).strip()
    bare = _MARKUP.sub(" ", bare).strip(" .")
    if bare and len(bare) <= 24:
        return coerce_score(bare)
    raise MalformedOutputError("The judge's reply contains no score.", detail=_clip(text))


def coerce_score(value: Any) -> float:
    """One allowed score from a JSON value or a short text; MalformedOutputError otherwise."""
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise MalformedOutputError(f"The judge's score {value!r} is not a number.")
    if isinstance(value, (int, float)):
        x = float(value)
    else:
        s = _MARKUP.sub(" ", str(value)).strip().lower().rstrip(".")
        if s in _WORDS:
            return _WORDS[s]
        m = _VALUE.match(s)
        if m is None:
            raise MalformedOutputError(f"The judge's score {str(value)!r} is not a number.")
        x = float(m.group(1))
        if m.group(2):
            den = float(m.group(3))
            if den <= 0:
                raise MalformedOutputError(f"The judge's score {str(value)!r} divides by {m.group(3)}.")
            x /= den
        elif m.group(4):
            x /= 100.0
    if not math.isfinite(x):
        raise MalformedOutputError(f"The judge's score {value!r} is not finite.")
    for allowed in SCORES:
        if abs(x - allowed) < 1e-9:
            return allowed
    raise MalformedOutputError(f"The judge's score {value!r} is not one of 1.0, 0.5 or 0.0.")


def _clip(text: str, n: int = 1000) -> str:
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more characters]"


# ------------------------------------------------------------------------------------------- verdicts

@dataclass
class Verdict(Record):  # to_dict / from_dict: the shared Record form (core/results)
    judge: str  # the judge's name in the run config
    model: dict  # model id, family, revision
    score: float | None  # None when failed
    status: str  # "scored" | "failed"
    replies: list[str] = field(default_factory=list)  # every raw reply, in order
    errors: list[str] = field(default_factory=list)  # why each unreadable reply was rejected
    prompt_version: str = ""
    criterion: str = ""
    seconds: float = 0.0
    key: str | None = None
    request: dict = field(default_factory=dict)  # the endpoint's request options and what its 400s changed


def _request_options(mllm: Any) -> dict[str, Any]:
    """The endpoint's non-default request options (OpenAI-compatible judges), e.g. no temperature."""
    return dict((getattr(mllm.info, "extra", None) or {}).get("request") or {})


def _model_part(info: ModelInfo) -> dict[str, Any]:
    return {"id": info.model_id, "family": info.family, "revision": info.revision}


class LLMMatchJudge:
    """One judge: an MLLM plus the versioned prompt; `judge(explanation, criterion)` -> Verdict."""

    def __init__(self, mllm: Any, name: str | None = None, *, store: Any = None, max_attempts: int = 3,
                 max_new_tokens: int = 512, prompt: PromptTemplate | None = None,
                 repair: PromptTemplate | None = None) -> None:
        if max_attempts < 1:
            raise ConfigError("A judge needs max_attempts >= 1.")
        self.mllm = mllm
        self.name = name or mllm.info.model_id
        self.store = store
        self.max_attempts = int(max_attempts)
        self.max_new_tokens = int(max_new_tokens)
        self.prompt = prompt or load_prompt("llm_match_judge")
        self.repair = repair or load_prompt("json_repair")

    def key_for(self, explanation: str, criterion: Criterion) -> str:
        from ..store import result_key

        options = _request_options(self.mllm)  # only when not the defaults: default judges keep their keys
        return result_key(VERDICT_KIND, judge=_model_part(self.mllm.info), prompt_version=self.prompt.version,
                          repair_version=self.repair.version, criterion_sha256=criterion.sha256(),
                          explanation_sha256=hashlib.sha256(explanation.encode("utf-8")).hexdigest(),
                          max_new_tokens=self.max_new_tokens, max_attempts=self.max_attempts, temperature=0.0,
                          **({"request": options} if options else {}))

    def cached(self, explanation: str, criterion: Criterion) -> Verdict | None:
        if self.store is None:
            return None
        hit = self.store.get(self.key_for(explanation, criterion))
        if hit is None:
            return None
        v = Verdict.from_dict(hit.payload)
        v.judge, v.key = self.name, hit.key
        return v

    def judge(self, explanation: str, criterion: Criterion) -> Verdict:
        import time

        if not explanation or not explanation.strip():
            raise ValueError("there is no explanation to judge")
        hit = self.cached(explanation, criterion)
        if hit is not None:
            return hit
        start = time.perf_counter()
        text = self.prompt.render(dataset_name=criterion.dataset_name, criterion=criterion.factor,
                                  explanation=explanation.strip())
        messages = [ChatMessage.user(text)]
        verdict = Verdict(self.name, _model_part(self.mllm.info), None, "failed",
                          prompt_version=self.prompt.version, criterion=criterion.key)
        for attempt in range(self.max_attempts):
            raw = self.mllm.chat(messages, max_new_tokens=self.max_new_tokens, temperature=0.0)
            verdict.replies.append(raw if isinstance(raw, str) else str(raw))
            try:
                verdict.score = parse_judge_score(raw)
                verdict.status = "scored"
                break
            except MalformedOutputError as exc:
                verdict.errors.append(exc.message)
                repair = self.repair.render(error=exc.message.rstrip("."), keys='"score"')
                messages = [*messages, ChatMessage("assistant", [raw or ""]), ChatMessage.user(repair)]
        verdict.seconds = time.perf_counter() - start
        verdict.request = {**_request_options(self.mllm),
                           **({"adjusted": self.mllm.shaper.adjustments}
                              if getattr(getattr(self.mllm, "shaper", None), "adjustments", None) else {})}
        key = self.key_for(explanation, criterion)
        if self.store is not None:
            payload = verdict.to_dict()
            payload.update(key=None, explanation_sha256=hashlib.sha256(explanation.encode("utf-8")).hexdigest(),
                           criterion_text=criterion.factor)
            self.store.put(key, VERDICT_KIND, payload)
        verdict.key = key
        return verdict


def llm_match(verdicts: Iterable[Verdict]) -> float | None:
    """The mean score of the judges that gave one (None if none did)."""
    scores = [v.score for v in verdicts if v.status == "scored" and v.score is not None]
    return sum(scores) / len(scores) if scores else None
