"""A local OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama) as the MLLM in one step: check that it
answers GET {url}/models with a model list, then keep it as the endpoint LOCAL_SERVER, the default MLLM.

The check says in words what is wrong: nothing answers at the address, or something answers that is not an
OpenAI-compatible API. An API key travels only as a reference (core/base/secrets.py), in the Authorization header.
"""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from ..base.errors import ModelError
from ..base.job_context import current_cancel_token
from ..base.secret_refs import resolve_secret

LOCAL_SERVER = "local-server"  # the endpoint's name in the settings
CHECK_TIMEOUT_S = 5.0
_NOT_OPENAI = ("Give the server's OpenAI-compatible base URL, usually ending in /v1 (`vllm serve MODEL`: "
               "http://localhost:8000/v1, SGLang: http://localhost:30000/v1).")


@dataclass(frozen=True)
class ServerCheck:
    base_url: str
    models: tuple[str, ...]  # ids under GET /models, in the server's order
    engine: str | None  # `owned_by` of the first model ("vllm", "sglang", ...), when it says


def check_server(url: str, api_key_ref: str | None = None, timeout: float = CHECK_TIMEOUT_S) -> ServerCheck:
    """GET {url}/models once (no retries: the user is waiting). Raises ConfigError for a malformed URL and
    ModelError, in words, when nothing answers or the answer is not an OpenAI-compatible model list."""
    from .adapters.http_deadline import fetch  # here: the window imports this module for LOCAL_SERVER, light
    from .adapters.openai_compatible import normalize_base_url
    base = normalize_base_url(url)
    headers = {"Accept": "application/json", "User-Agent": "nemo-desktop"}
    key = resolve_secret(api_key_ref)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(base + "/models", headers=headers, method="GET")
    try:
        raw = fetch(request, timeout=timeout, cancel=current_cancel_token())
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise ModelError(f"{base} answers but refuses the request without a valid API key (HTTP {exc.code}).",
                             hint="Add the server under 'OpenAI-compatible endpoints' with a reference to its "
                                  "key, then Use it.") from None
        raise ModelError(f"{base} answers, but not as an OpenAI-compatible API: GET {base}/models gave "
                         f"HTTP {exc.code}.", hint=_NOT_OPENAI) from None
    except TimeoutError:
        raise ModelError(f"{base} did not answer within {timeout:g} s.",
                         hint="Is the server still starting (loading its model)? Try again when it is up.") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ModelError(f"Nothing answers at {base} ({reason}).",
                         hint="Start the server first and check the address and port (`vllm serve MODEL` "
                              "listens on http://localhost:8000/v1).") from None
    try:
        data = json.loads(raw)["data"]
        models = tuple(str(m["id"]) for m in data if isinstance(m, dict) and m.get("id"))
        first = next((m for m in data if isinstance(m, dict)), {})
    except (ValueError, KeyError, TypeError):
        raise ModelError(f"{base} answers, but not as an OpenAI-compatible API: GET {base}/models did not "
                         "return a model list.", hint=_NOT_OPENAI) from None
    if not models:
        raise ModelError(f"{base} is an OpenAI-compatible server but serves no model.",
                         hint="Start it with a model (e.g. `vllm serve Qwen/Qwen2.5-VL-7B-Instruct`).")
    return ServerCheck(base, models, str(first.get("owned_by") or "").lower() or None)
