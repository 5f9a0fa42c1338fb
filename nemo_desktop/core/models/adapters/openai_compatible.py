"""Multimodal LLM behind any OpenAI-compatible chat-completions endpoint (vLLM, SGLang, Ollama, LM Studio,
hosted APIs), using only the standard library's HTTP client.

    ModelSpec(kind="mllm", family="openai-compatible", source="http://localhost:8000/v1",
              options={"model": "Qwen/Qwen2.5-VL-7B-Instruct", "api_key": "env:OPENAI_API_KEY"})

`source` is the API base URL including its version path (as OpenAI clients expect); a bare host gets
"/v1". Options: model (default: the only model the server lists), api_key (a reference, see
core/base/secrets.py), timeout (s, per request), max_retries, backoff_base (s), max_retry_after (s),
concurrency (parallel requests in chat_batch), max_in_flight (requests this machine sends to the base URL
at once, shared by every thread and process: several workers on one vLLM server; see endpoint_limit.py),
image_format ("JPEG" at quality 95 by default: several
times smaller and faster to encode than PNG, see benchmarks/image_decode.py; "PNG" for lossless),
max_image_side (px, default 2048),
max_new_tokens (default when a call passes None), extra_body (dict merged into every request).
Per-model request options (openai_request.py): token_limit_field ("max_tokens" or "max_completion_tokens"),
send_temperature (false for models that accept only their default), reasoning_effort, response_format
("json_object" or an OpenAI response_format object such as a JSON schema), sampling_fields ("openai", "vllm"
to send top_k and min_p too, or by default "auto": "vllm" when GET /models says vLLM or SGLang serves it).
A 400 reply naming a field the model does not support is answered by adjusting the request once (logged) and
sending it again.

Retries with exponential backoff and jitter on 408/429/5xx and connection failures, honouring
Retry-After. Timeouts are not retried (a server that is slow once is usually slow again). The running job's
cancel token (core/base/job_context.py `current_cancel_token`) interrupts a request in flight and a wait between
retries.
The API key is sent only in the Authorization header; it never enters a log record or an error.
"""
from __future__ import annotations

import email.utils
import http.client
import json
import logging
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ...base.errors import ConfigError, MalformedOutputError, ModelError
from ...base.images import to_data_url
from ...base.job_context import cancel_scope, current_cancel_token
from ...base.secret_refs import describe_secret_ref, resolve_secret
from ...base.secrets import redact
from ..protocols import ChatMessage, ChatRequest, ModelInfo, Reply
from ..families import LoadOptions, ModelSpec, register_family
from ..requests import ChatBatchFromRequests
from .endpoint_limit import EndpointLimiter
from .http_deadline import fetch
from ..sampling import resolve_sampling
from .openai_request import DROPPABLE, RequestOptions, RequestShaper
from .spec_checks import check_options

log = logging.getLogger(__name__)

FAMILY = "openai-compatible"
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_BODY_SNIPPET = 500


class _BadRequest(Exception):
    """An HTTP 400: the server's reply (JSON or text) and the error to raise if nothing can be adjusted."""

    def __init__(self, reply: Any, error: Exception):
        super().__init__(str(error))
        self.reply = reply
        self.error = error


class _Retryable(Exception):
    def __init__(self, summary: str, retry_after: float | None = None):
        super().__init__(summary)
        self.summary = summary
        self.retry_after = retry_after


class OpenAICompatibleMLLM(ChatBatchFromRequests):
    """MultimodalLLM over HTTP. Thread-safe: chat_batch runs several chat() calls at once."""

    def __init__(self, base_url: str, model: str | None = None, *, api_key_ref: str | None = None,
                 timeout: float = 120.0, max_retries: int = 4, backoff_base: float = 1.0,
                 max_retry_after: float = 120.0, concurrency: int = 4, image_format: str = "JPEG",
                 max_image_side: int | None = 2048, max_new_tokens: int = 512,
                 extra_body: dict | None = None, model_id: str | None = None,
                 request: RequestOptions | None = None, max_in_flight: int | None = None):
        self.base_url = normalize_base_url(base_url)
        self.api_key_ref = api_key_ref
        self._api_key = resolve_secret(api_key_ref)  # kept private; never formatted into any text
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_base = float(backoff_base)
        self.max_retry_after = float(max_retry_after)
        self.concurrency = max(1, int(concurrency))
        self.image_format = image_format.upper()
        self.max_image_side = max_image_side
        self.default_max_new_tokens = int(max_new_tokens)
        self.extra_body = dict(extra_body or {})
        self.limiter = EndpointLimiter(self.base_url, max_in_flight) if max_in_flight is not None else None
        self.model = model or self._only_served_model()
        self.last_usage: dict[str, Any] = {}
        self.request_options = request or RequestOptions()
        self.shaper = RequestShaper(self.request_options, self.base_url, self._serving_engine)
        self.info = ModelInfo(model_id=model_id or f"{FAMILY}:{self.model}@{self.base_url}", family=FAMILY,
                              revision=None, extra={"base_url": self.base_url, "model": self.model,
                                                    **({"request": self.request_options.non_default()}
                                                       if self.request_options.non_default() else {})})

    # -- MultimodalLLM ---------------------------------------------------------------------------------

    def chat(self, messages: Sequence[ChatMessage], *, max_new_tokens: int | None = None,
             temperature: float = 0.0, seed: int | None = None, top_p: float | None = None,
             top_k: int | None = None, min_p: float | None = None) -> str:
        encoded = [self._encode_message(m) for m in messages]
        sampling = resolve_sampling(float(temperature), top_p, top_k, min_p)
        limit = int(max_new_tokens or self.default_max_new_tokens)

        def body() -> dict:
            return {**self.shaper.body(self.model, encoded, limit, sampling, seed), **self.extra_body}

        request = body()
        for _ in range(len(DROPPABLE) + 2):  # each adjustment is learnt once, so this ends
            try:
                reply = self._request("POST", "/chat/completions", request, bad_request=True)
                break
            except _BadRequest as exc:
                if self.shaper.learn(request, exc.reply) is None:
                    raise exc.error from None
                request = body()
        else:  # pragma: no cover - learn() returns None once nothing is left to adjust
            raise ModelError(f"{self.base_url} kept refusing the request's parameters.")
        text = _reply_text(reply, self.base_url)
        self.last_usage = reply.get("usage") or {}
        return Reply(text, *_how_it_ended(reply))

    def chat_requests(self, requests: Sequence[ChatRequest]) -> list[str]:
        """Each request with its own settings, up to `concurrency` at once (the server batches them)."""
        if not requests:
            return []

        token = current_cancel_token()  # pool threads do not inherit it: hand it on

        def one(request: ChatRequest):
            with cancel_scope(token):
                return self.chat(request.messages, **request.chat_kwargs())

        if len(requests) == 1 or self.concurrency == 1:
            return [one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests)),
                                thread_name_prefix="nemo-openai") as pool:
            return list(pool.map(one, requests))  # map keeps the input order

    def served_models(self) -> list[str]:
        """Model ids the server lists under GET /models."""
        reply = self._request("GET", "/models", None, retry=False)
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list):
            raise MalformedOutputError(f"{self.base_url}/models did not return a model list.",
                                       hint="Check that the base URL points to an OpenAI-compatible API.")
        return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]

    def _serving_engine(self) -> str | None:
        """`owned_by` of this model in GET /models ("vllm", "sglang", "openai", ...), or None if unknown."""
        try:
            reply = self._request("GET", "/models", None, retry=False)
        except Exception:  # noqa: BLE001 - only decides which optional sampling fields to send
            return None
        for m in (reply.get("data") if isinstance(reply, dict) else None) or []:
            if isinstance(m, dict) and m.get("id") == self.model:
                return str(m.get("owned_by") or "").lower() or None
        return None

    # -- request building ------------------------------------------------------------------------------

    def _encode_message(self, message: ChatMessage) -> dict:
        parts: list[dict] = []
        for part in message.content:
            if isinstance(part, str):
                parts.append({"type": "text", "text": part})
            else:
                url = to_data_url(part, self.image_format, max_side=self.max_image_side)
                parts.append({"type": "image_url", "image_url": {"url": url}})
        if all(p["type"] == "text" for p in parts):
            # Plain string content: the form every server accepts (some reject lists for system messages).
            return {"role": message.role, "content": "".join(p["text"] for p in parts)}
        return {"role": message.role, "content": parts}

    # -- HTTP ------------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict | None, *, retry: bool = True,
                 bad_request: bool = False) -> dict:
        """The reply's JSON. `bad_request`: an HTTP 400 raises _BadRequest (the caller may adjust the body)."""
        try:
            return self._attempts(method, path, body, retry)
        except _BadRequest as exc:
            if bad_request:
                raise
            raise exc.error from None

    def _attempts(self, method: str, path: str, body: dict | None, retry: bool) -> dict:
        url = self.base_url + path
        data = json.dumps(body).encode("utf-8") if body is not None else None
        headers = {"Accept": "application/json", "User-Agent": "nemo-desktop"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempts = 1 + (self.max_retries if retry else 0)
        for attempt in range(attempts):
            log.debug("%s %s (attempt %d of %d, %d bytes)", method, url, attempt + 1, attempts, len(data or b""))
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method=method)
                if self.limiter is None:
                    return self._send(request, path)
                with self.limiter.slot():  # held on the wire only, not while waiting to retry
                    return self._send(request, path)
            except _Retryable as exc:
                if attempt + 1 >= attempts:
                    raise self._gave_up(exc, attempts) from None
                delay = self._delay(attempt, exc.retry_after)
                log.warning("%s from %s; retrying in %.1f s (%d of %d)", exc.summary, self.base_url, delay,
                            attempt + 1, self.max_retries)
                cancel = current_cancel_token()
                if cancel is None:
                    time.sleep(delay)
                elif cancel.wait(delay):
                    cancel.raise_if_cancelled()
        raise AssertionError("unreachable")

    def _send(self, request: urllib.request.Request, path: str) -> dict:
        try:
            raw = fetch(request, timeout=self.timeout, cancel=current_cancel_token())  # bounds the whole exchange
        except urllib.error.HTTPError as exc:
            raw = _read_quietly(exc)
            if exc.code in RETRY_STATUS:
                raise _Retryable(f"HTTP {exc.code}", _retry_after(exc.headers.get("Retry-After"))) from None
            error = self._http_error(exc.code, raw, request.full_url, path)
            if exc.code == 400:
                raise _BadRequest(_json_or_text(raw), error) from None
            raise error from None
        except urllib.error.URLError as exc:
            # Failing to connect (refused, reset, DNS, connect timeout) is worth another try.
            raise _Retryable(f"connection failed ({_reason(exc.reason)})") from None
        except (TimeoutError, socket.timeout):
            raise ModelError(f"{self.base_url} did not answer within {self.timeout:g} s.",
                             hint="The model may be overloaded or the request too large: raise the timeout "
                                  "option, lower max_new_tokens or the image size, or check the server.") from None
        except (ConnectionError, OSError, http.client.HTTPException) as exc:
            raise _Retryable(f"connection failed ({_reason(exc)})") from None
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MalformedOutputError(f"{self.base_url} answered with something that is not JSON.",
                                       hint="Check that the base URL points to an OpenAI-compatible API "
                                            "(usually ending in /v1).",
                                       detail=self._clean(f"{exc}; body starts: {raw[:_BODY_SNIPPET]!r}")) from None

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                raise ModelError(f"{self.base_url} is rate-limiting requests and asks to wait "
                                 f"{retry_after:.0f} s.",
                                 hint="Try again later, lower the concurrency option, or raise max_retry_after.")
            return retry_after
        step = self.backoff_base * (2 ** attempt)
        return step / 2 + random.uniform(0, step / 2)  # "equal jitter": spread out clients that failed together

    def _gave_up(self, exc: _Retryable, attempts: int) -> ModelError:
        if exc.summary.startswith("connection failed"):
            return ModelError(f"Could not connect to {self.base_url} ({exc.summary}; {attempts} attempts).",
                              hint="Is the server running and the base URL right? (e.g. `vllm serve MODEL` "
                                   "listens on http://localhost:8000/v1, Ollama on http://localhost:11434/v1.)")
        return ModelError(f"{self.base_url} kept failing ({exc.summary}) after {attempts} attempts.",
                          hint="The server is overloaded or failing; try again later or lower the concurrency "
                               "option.")

    def _http_error(self, code: int, raw: bytes, url: str, path: str) -> Exception:
        server_says = self._clean(_error_message(raw))
        where = describe_secret_ref(self.api_key_ref)
        if code in (401, 403):
            what = "rejected the API key" if self._api_key else "requires an API key, and none was sent"
            hint = (f"Check the key in the {where}." if self._api_key else
                    "Set the api_key option to a reference such as 'env:OPENAI_API_KEY'.")
            if code == 403 and self._api_key:
                hint += " The key may also lack access to this model."
            return ModelError(f"{self.base_url} {what} (HTTP {code}).", hint=hint, detail=server_says)
        if code == 404 and path != "/models":  # (listing the models on a 404 of /models would loop)
            return self._not_found(url, server_says)
        if code == 413:
            return ModelError(f"{self.base_url} refused the request as too large (HTTP 413).",
                              hint="Lower the max_image_side option or use JPEG images (image_format='JPEG').",
                              detail=server_says)
        return ModelError(f"{self.base_url} refused the request (HTTP {code}): {server_says or 'no details'}",
                          hint="Check the model name and options; a too-long prompt or too many images can "
                               "exceed the server's limits.")

    def _not_found(self, url: str, server_says: str) -> ModelError:
        try:
            served = self.served_models()
        except Exception:  # noqa: BLE001 - the listing is only a better message, not required
            served = None
        if served is None:
            return ModelError(f"{url} was not found (HTTP 404), and {self.base_url}/models is not reachable.",
                              hint="Check the base URL; OpenAI-compatible servers usually end in /v1.",
                              detail=server_says)
        if self.model not in served:
            return ModelError(f"The model '{self.model}' is not served at {self.base_url}.",
                              hint="It serves: " + (", ".join(served) or "no models") + ". Set the model option "
                                   "to one of these.", detail=server_says)
        return ModelError(f"{url} was not found (HTTP 404) although the server lists '{self.model}'.",
                          hint="The server may not support chat completions with images for this model.",
                          detail=server_says)

    def _only_served_model(self) -> str:
        served = self.served_models()
        if len(served) == 1:
            return served[0]
        raise ConfigError(f"No model name was given and {self.base_url} serves "
                          f"{len(served)} models.",
                          hint="Set the model option to one of: " + (", ".join(served) or "(none)") + ".")

    def _clean(self, text: str) -> str:
        return redact(text, [self._api_key] if self._api_key else None)


def normalize_base_url(url: str) -> str:
    url = (url or "").strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"'{url}' is not an http(s) URL.",
                          hint="Give the endpoint's base URL, e.g. http://localhost:8000/v1.")
    if parts.username or parts.password or parts.query:
        # The base URL is recorded in manifests and reports; credentials must travel as an api_key reference.
        raise ConfigError("The endpoint URL must not contain a user name, password or query string.",
                          hint="Put the key in an environment variable and give its name as the API key reference.")
    return url if parts.path else url + "/v1"


def _reply_text(reply: Any, base_url: str) -> str:
    try:
        message = reply["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise MalformedOutputError(f"The reply of {base_url} has no choices[0].message.",
                                   hint="The server may not be OpenAI-compatible, or it failed mid-answer.",
                                   detail=str(reply)[:_BODY_SNIPPET]) from None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        raise MalformedOutputError(f"{base_url} returned no text" + (f" (refusal: {refusal})" if refusal else "")
                                   + ".", hint="Rephrase the request or try another model.",
                                   detail=str(reply)[:_BODY_SNIPPET])
    return content


def _how_it_ended(reply: dict) -> tuple[str | None, int | None]:
    """(choices[0].finish_reason, usage.completion_tokens) as the server gave them; None where it gave none or
    something else than a short word / a count (only "length" is acted on: the reply was cut at max_tokens)."""
    choice = reply["choices"][0]
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    finish = (finish.strip().lower()[:40] or None) if isinstance(finish, str) else None
    usage = reply.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else None
    return finish, tokens


def _error_message(raw: bytes) -> str:
    try:
        data = json.loads(raw)
        err = data.get("error", data) if isinstance(data, dict) else data
        msg = err.get("message") if isinstance(err, dict) else err
        return str(msg or data)[:_BODY_SNIPPET]
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return raw[:_BODY_SNIPPET].decode("utf-8", "replace")


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw[:_BODY_SNIPPET].decode("utf-8", "replace")


def _read_quietly(exc: urllib.error.HTTPError) -> bytes:
    try:
        return exc.read()
    except Exception:  # noqa: BLE001
        return b""


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _reason(reason: Any) -> str:
    return type(reason).__name__ if not str(reason) else str(reason)


@register_family("mllm", FAMILY)
def load_openai_compatible(spec: ModelSpec, options: LoadOptions) -> OpenAICompatibleMLLM:
    opts = dict(spec.options)
    request_keys = set(RequestOptions.__dataclass_fields__)
    known = {"model", "api_key", "timeout", "max_retries", "backoff_base", "max_retry_after", "concurrency",
             "max_in_flight", "image_format", "max_image_side", "max_new_tokens", "extra_body"} | request_keys
    check_options(opts, sorted(known), "an OpenAI-compatible endpoint")
    api_key_ref = opts.pop("api_key", None)
    request = RequestOptions(**{k: opts.pop(k) for k in list(opts) if k in request_keys})
    return OpenAICompatibleMLLM(spec.source, opts.pop("model", None), api_key_ref=api_key_ref,
                                model_id=spec.catalog_id, request=request, **opts)
