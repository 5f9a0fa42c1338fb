"""openai-compatible request options (issue 12 §4 and the sampling fields of §1), against a loopback HTTP
server that behaves like an OpenAI reasoning model (a test double, never shipped): it answers HTTP 400 with
OpenAI's error body for `max_tokens`, for any temperature but 1, and for `top_p`, and accepts
`max_completion_tokens` and `reasoning_effort`. The shipped Table 1 judge options are loaded from the real
config file and pointed at it."""
from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nemo_desktop.core.benchmark.judge import LLMMatchJudge, load_criterion
from nemo_desktop.core.base.errors import ConfigError, ModelError
from nemo_desktop.core.models.protocols import ChatMessage
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

CONFIGS = Path(__file__).resolve().parents[3] / "resources" / "benchmarks" / "configs"


def _openai_400(param: str, message: str, code: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def reasoning_model_policy(body: dict) -> dict | None:
    """What an OpenAI reasoning model refuses (the error bodies OpenAI sends), or None if it accepts."""
    if "max_tokens" in body:
        return _openai_400("max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                         "Use 'max_completion_tokens' instead.", "unsupported_parameter")
    if "temperature" in body and body["temperature"] != 1:
        return _openai_400("temperature", f"Unsupported value: 'temperature' does not support {body['temperature']} "
                                          "with this model. Only the default (1) value is supported.",
                           "unsupported_value")
    if "top_p" in body:
        return _openai_400("top_p", "Unsupported parameter: 'top_p' is not supported with this model.",
                           "unsupported_parameter")
    return None


@pytest.fixture
def endpoint():
    state = {"bodies": [], "policy": reasoning_model_policy, "reply": '{"reasoning": "named", "score": 1.0}',
             "owned_by": "openai", "listings": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status, obj):
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            state["listings"] += 1
            self._send(200, {"object": "list", "data": [{"id": "reasoner", "object": "model",
                                                          "owned_by": state["owned_by"]}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["bodies"].append(body)
            refusal = state["policy"](body)
            if refusal is not None:
                return self._send(400, refusal)
            self._send(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": state["reply"]}}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    server.shutdown()
    server.server_close()


def _load(url: str, **options):
    return load_model(ModelSpec("mllm", "openai-compatible", url, options={"model": "reasoner", **options}),
                      LoadOptions())


def test_default_options_still_get_judge_scores_from_a_reasoning_model(endpoint, caplog):
    url, state = endpoint
    judge = LLMMatchJudge(_load(url), "GPT")
    with caplog.at_level(logging.WARNING):
        verdicts = [judge.judge(text, load_criterion("imagenet-r")) for text in
                    ("The cartoon style misleads the model.", "A sketch rendition, not a photo.")]
    assert [v.score for v in verdicts] == [1.0, 1.0] and all(v.status == "scored" for v in verdicts)
    # First call: 400 max_tokens, 400 temperature, then accepted; the second call is sent right at once.
    assert len(state["bodies"]) == 4
    final = state["bodies"][-1]
    assert "max_tokens" not in final and final["max_completion_tokens"] == 512 and "temperature" not in final
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # each adjustment logged once, not per request
    assert any("max_completion_tokens instead of max_tokens" in w for w in warnings)
    assert any("no longer sending temperature" in w for w in warnings)
    assert verdicts[1].request == {"adjusted": {"token_limit_field": "max_completion_tokens",
                                                "not_sent": ["temperature"]}}


def test_the_shipped_table_configs_judge_options_are_accepted_at_once(endpoint):
    from nemo_desktop.core.benchmark.config import load_config

    url, state = endpoint
    for name in ("table1.toml", "table2.toml", "table4.toml"):
        cfg = load_config(CONFIGS / name)
        gpt = next(j for j in cfg.judges if j.label == "GPT")
        spec = gpt.model.spec()
        assert spec.family == "openai-compatible" and gpt.max_new_tokens >= 4096  # room for reasoning tokens
        options = {k: v for k, v in spec.options.items() if k != "api_key"}
        judge = LLMMatchJudge(_load(url, **options), "GPT", max_new_tokens=gpt.max_new_tokens)
        state["bodies"].clear()
        verdict = judge.judge("The cartoon style misleads the model.", load_criterion("imagenet-r"))
        assert verdict.score == 1.0 and len(state["bodies"]) == 1  # no 400 to learn from
        body = state["bodies"][0]
        assert body["max_completion_tokens"] == gpt.max_new_tokens and "temperature" not in body
        assert body["reasoning_effort"] == options["reasoning_effort"]
        assert verdict.request["token_limit_field"] == "max_completion_tokens"


def test_request_options_are_part_of_the_verdict_key(endpoint):
    url, _ = endpoint
    criterion = load_criterion("imagenet-r")
    plain = LLMMatchJudge(_load(url), "GPT").key_for("x", criterion)
    shaped = LLMMatchJudge(_load(url, send_temperature=False), "GPT").key_for("x", criterion)
    assert plain != shaped
    # Options left at their defaults keep the key a judge had before these options existed.
    assert LLMMatchJudge(_load(url, token_limit_field="max_tokens"), "GPT").key_for("x", criterion) == plain


def test_a_server_naming_the_field_only_in_its_message(endpoint):
    url, state = endpoint

    def azure_like(body):
        if "reasoning_effort" in body:
            return {"error": {"message": "Unrecognized request argument supplied: reasoning_effort",
                              "type": "invalid_request_error", "param": None, "code": None}}
        return None

    state["policy"] = azure_like
    mllm = _load(url, reasoning_effort="low")
    assert mllm.chat([ChatMessage.user("hi")]) == state["reply"]
    assert "reasoning_effort" in state["bodies"][0] and "reasoning_effort" not in state["bodies"][-1]


def test_a_400_that_names_no_unsupported_field_is_an_error_without_retries(endpoint):
    url, state = endpoint
    state["policy"] = lambda body: {"error": {"message": "max_tokens is too large: 10000000. This model supports "
                                                        "at most 4096 completion tokens.", "param": "max_tokens",
                                              "code": "invalid_value"}}
    with pytest.raises(ModelError, match="HTTP 400"):
        _load(url).chat([ChatMessage.user("hi")], max_new_tokens=10_000_000)
    assert len(state["bodies"]) == 1


def test_sampled_calls_send_every_sampling_field(endpoint):
    url, state = endpoint
    state["policy"] = lambda body: None  # a vLLM-like server that accepts everything
    vllm = _load(url, sampling_fields="vllm")
    vllm.chat([ChatMessage.user("hi")], temperature=0.7, seed=3)
    vllm.chat([ChatMessage.user("hi")], temperature=0.7, top_k=20, min_p=0.05, seed=4)
    vllm.chat([ChatMessage.user("hi")])
    openai = _load(url, sampling_fields="openai")
    openai.chat([ChatMessage.user("hi")], temperature=0.7, top_k=20, seed=5)
    b = state["bodies"]
    assert {k: b[0][k] for k in ("temperature", "top_p", "top_k", "min_p", "seed")} == \
        {"temperature": 0.7, "top_p": 0.95, "top_k": -1, "min_p": 0.0, "seed": 3}  # -1: off for vLLM and SGLang
    assert (b[1]["top_k"], b[1]["min_p"]) == (20, 0.05)
    assert b[2]["temperature"] == 0.0 and not {"top_p", "top_k", "min_p", "seed"} & set(b[2])
    assert b[3]["top_p"] == 0.95 and "top_k" not in b[3] and "min_p" not in b[3]  # OpenAI rejects those


@pytest.mark.parametrize("owned_by, extended", [("vllm", True), ("sglang", True), ("openai", False)])
def test_auto_sampling_fields_follow_the_serving_engine(endpoint, owned_by, extended):
    """By default a vLLM/SGLang server gets top_k and min_p, so its generation_config default (Qwen2.5-VL:
    top_k=1) cannot make sampled draws greedy; the listing is asked once, and only for sampled calls."""
    url, state = endpoint
    state["policy"], state["owned_by"] = (lambda body: None), owned_by
    mllm = _load(url)
    mllm.chat([ChatMessage.user("hi")])
    assert state["listings"] == 0
    for seed in (1, 2):
        mllm.chat([ChatMessage.user("hi")], temperature=0.7, seed=seed)
    assert state["listings"] == 1
    assert all(("top_k" in b and b["top_k"] == -1) == extended for b in state["bodies"][1:])


def test_response_format_goes_out_verbatim_or_as_json_object(endpoint):
    url, state = endpoint
    state["policy"] = lambda body: None
    schema = {"type": "json_schema", "json_schema": {"name": "llm_match", "strict": True, "schema": {
        "type": "object", "properties": {"score": {"type": "number", "enum": [0, 0.5, 1]}},
        "required": ["score"], "additionalProperties": False}}}
    _load(url, response_format=schema).chat([ChatMessage.user("hi")])
    _load(url, response_format="json_object").chat([ChatMessage.user("hi")])
    assert state["bodies"][0]["response_format"] == schema
    assert state["bodies"][1]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("options", [{"token_limit_field": "max_output_tokens"}, {"sampling_fields": "tgi"},
                                     {"response_format": "json"}, {"send_temperature": "no"}, {"sampling_fields": "vLLM"}])
def test_bad_request_options_are_config_errors(endpoint, options):
    with pytest.raises(ConfigError):
        _load(endpoint[0], **options)
