"""The body of a chat-completions request, shaped per model, and learning from a 400 that names a parameter.

Endpoints differ in what they accept: OpenAI's reasoning models (GPT-5 family, o-series) reject `max_tokens`
(they take `max_completion_tokens`) and any temperature but their default; vLLM and SGLang accept `top_k`
and `min_p`, which OpenAI rejects. The per-model options of the OpenAI-compatible adapter say which fields to
send (`RequestOptions`); when a server still answers HTTP 400 naming one of the fields it does not support,
`RequestShaper.learn` adjusts (renames the token-limit field, or stops sending that field) and the request
is sent again; every later request of that adapter uses the adjusted shape, and the change is logged once.

Sampling: a greedy call sends `temperature: 0`; a sampled call sends every sampling field explicitly
(temperature and top_p always; top_k and min_p where the server takes them: `sampling_fields = "vllm"`, or by
default "auto", which asks the model listing whether vLLM or SGLang serves it, `owned_by`), so a server that
applies the model's generation_config by default (vLLM) cannot turn the draws greedy (Qwen2.5-VL ships
top_k=1). top_k
"off" goes out as -1: vLLM and SGLang both read -1 as off, while older vLLM rejects 0 (vllm-project/vllm#17553).
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ...base.errors import ConfigError
from ..sampling import Sampling

log = logging.getLogger(__name__)

TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")
SAMPLING_FIELDS = ("auto", "openai", "vllm")
EXTENDED_SAMPLING_SERVERS = ("vllm", "sglang")  # `owned_by` of their /models entries; both take top_k, min_p
# Fields a request can go on without when a server rejects them (the token limit is renamed instead).
DROPPABLE = ("temperature", "top_p", "top_k", "min_p", "seed", "reasoning_effort", "response_format")
_UNSUPPORTED = re.compile(r"unsupported|not supported|unrecognized|unknown|not allowed|not permitted|"
                          r"does not support|extra (?:inputs|fields)|invalid (?:field|parameter|argument)",
                          re.IGNORECASE)


@dataclass(frozen=True)
class RequestOptions:
    """Which fields a model's requests carry (adapter options of the same names)."""

    token_limit_field: str = "max_tokens"  # "max_completion_tokens" for OpenAI reasoning models
    send_temperature: bool = True  # False: no temperature/top_p/top_k/min_p (the model's own sampling)
    reasoning_effort: str | None = None  # e.g. "low" | "medium" | "high" (reasoning models)
    response_format: Any = None  # "json_object", or an OpenAI response_format object (e.g. a JSON schema)
    sampling_fields: str = "auto"  # "vllm": also top_k and min_p (vLLM, SGLang); "auto": ask the server

    def __post_init__(self) -> None:
        if self.token_limit_field not in TOKEN_FIELDS:
            raise ConfigError(f"token_limit_field must be one of {', '.join(TOKEN_FIELDS)}, "
                              f"not {self.token_limit_field!r}.",
                              hint="OpenAI reasoning models (GPT-5, o-series) take max_completion_tokens.")
        if self.sampling_fields not in SAMPLING_FIELDS:
            raise ConfigError(f"sampling_fields must be one of {', '.join(SAMPLING_FIELDS)}, "
                              f"not {self.sampling_fields!r}.",
                              hint="'vllm' also sends top_k and min_p, which vLLM and SGLang accept; 'auto' "
                                   "does so when the server's model listing says vLLM or SGLang serves it.")
        if not isinstance(self.send_temperature, bool):
            raise ConfigError(f"send_temperature must be true or false, not {self.send_temperature!r}.")
        if self.reasoning_effort is not None and (not isinstance(self.reasoning_effort, str)
                                                  or not self.reasoning_effort.strip()):
            raise ConfigError(f"reasoning_effort must be a word such as 'low', not {self.reasoning_effort!r}.")
        rf = self.response_format
        if rf is not None and rf != "json_object" and not (isinstance(rf, dict) and rf.get("type")):
            raise ConfigError("response_format must be 'json_object' or an object with a 'type' "
                              "(e.g. {type = \"json_schema\", json_schema = {...}}).")

    def non_default(self) -> dict[str, Any]:
        """The options that differ from the defaults (for cache keys: default requests keep their keys)."""
        default = RequestOptions()
        return {k: v for k, v in asdict(self).items() if v != getattr(default, k)}


class RequestShaper:
    """Builds request bodies from RequestOptions plus what the server's 400 replies taught. Thread-safe."""

    def __init__(self, options: RequestOptions, where: str, detect_server: Callable[[], str | None] = lambda: None):
        self.options = options
        self.where = where
        self._detect_server = detect_server  # the serving engine (`owned_by`), asked once for "auto"
        self._sampling_fields = None if options.sampling_fields == "auto" else options.sampling_fields
        self._lock = threading.Lock()
        self._token_field = options.token_limit_field
        self._dropped: set[str] = set()

    @property
    def adjustments(self) -> dict[str, Any]:
        """What the server made this adapter change, for the record."""
        with self._lock:
            out: dict[str, Any] = {}
            if self._token_field != self.options.token_limit_field:
                out["token_limit_field"] = self._token_field
            if self._dropped:
                out["not_sent"] = sorted(self._dropped)
            return out

    def sampling_fields(self) -> str:
        """"openai" or "vllm"; for "auto", decided on the first sampled call from the server's listing."""
        if self._sampling_fields is None:
            server = self._detect_server()
            self._sampling_fields = "vllm" if server in EXTENDED_SAMPLING_SERVERS else "openai"
            log.info("%s: sending %s sampling fields (server: %s).", self.where, self._sampling_fields,
                     server or "unknown")
        return self._sampling_fields

    def body(self, model: str, messages: list[dict], max_tokens: int, sampling: Sampling | None,
             seed: int | None) -> dict[str, Any]:
        opts = self.options
        body: dict[str, Any] = {"model": model, "messages": messages}
        with self._lock:
            body[self._token_field] = int(max_tokens)
            dropped = set(self._dropped)
        if opts.send_temperature:
            if sampling is None:
                body["temperature"] = 0.0
            else:
                body["temperature"] = sampling.temperature
                body["top_p"] = sampling.top_p
                if self.sampling_fields() == "vllm":
                    body["top_k"] = sampling.top_k if sampling.top_k > 0 else -1
                    body["min_p"] = sampling.min_p
        if seed is not None:
            body["seed"] = int(seed)
        if opts.reasoning_effort:
            body["reasoning_effort"] = opts.reasoning_effort
        if opts.response_format is not None:
            rf = opts.response_format
            body["response_format"] = {"type": "json_object"} if rf == "json_object" else rf
        for name in dropped:
            body.pop(name, None)
        return body

    def learn(self, body: dict[str, Any], error: Any) -> str | None:
        """Adjust to a 400 reply that names an unsupported field of `body`; the change made, or None
        (then the error stands). `error` is the reply's JSON (`{"error": {"message", "param"}}`) or text."""
        param, message = _named_parameter(body, error)
        if param is None:
            return None
        with self._lock:
            if param in TOKEN_FIELDS:
                other = TOKEN_FIELDS[1 - TOKEN_FIELDS.index(param)]
                if self._token_field != param:
                    return None
                self._token_field = other
                change = f"sending {other} instead of {param}"
            elif param in DROPPABLE and param not in self._dropped:
                self._dropped.add(param)
                change = f"no longer sending {param}"
            else:
                return None
        log.warning("%s does not accept '%s' (%s); %s from now on.", self.where, param,
                    message[:200] if message else "HTTP 400", change)
        return change


def _named_parameter(body: dict[str, Any], error: Any) -> tuple[str | None, str]:
    """(the body field a 400 reply says is unsupported, the server's message)."""
    err = error.get("error", error) if isinstance(error, dict) else None
    message = str(err.get("message") or "") if isinstance(err, dict) else str(error or "")
    param = err.get("param") if isinstance(err, dict) else None
    code = str(err.get("code") or "") if isinstance(err, dict) else ""
    if not (_UNSUPPORTED.search(message) or "unsupported" in code):
        return None, message
    if isinstance(param, str) and param in body:
        return param, message
    for name in body:  # servers without a `param` field: the first field of ours the message names
        if name not in ("model", "messages") and re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", message):
            return name, message
    return None, message
