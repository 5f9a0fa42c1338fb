"""openai-compatible: the client against a real HTTP server on 127.0.0.1 that implements
POST /v1/chat/completions and GET /v1/models (a test double, never shipped).

The server parses what the client sent for real: it checks the bearer key, decodes every data-URL image
with PIL, and answers either with a deterministic report of what it received (size, format, text) or by
running a tiny Qwen2-VL through the transformers adapter. Scripted failures (503, 429 + Retry-After,
slow answers, malformed bodies) exercise the retry and error paths.
"""
from __future__ import annotations

import base64
import io
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.base.errors import ConfigError, MalformedOutputError, ModelError
from nemo_desktop.core.models.adapters.openai_compatible import OpenAICompatibleMLLM
from nemo_desktop.core.models.protocols import ChatMessage, MultimodalLLM
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

SERVED = "tiny/qwen2-vl"
KEY = "nemo-test-" + "k3y" * 8  # no well-known token shape: only the adapter's own discipline hides it
ENV = "NEMO_TEST_OPENAI_KEY"


class ChatServer:
    """State shared with the handler threads: expected key, scripted failures, what arrived."""

    def __init__(self):
        self.api_key: str | None = KEY
        self.script: list[tuple[int, dict, bytes]] = []  # consumed first: (status, headers, body)
        self.delay = 0.0
        # (openai messages, decoded images, body) -> reply text, or (text, finish_reason, completion_tokens)
        self.backend = describe_request
        self.requests: list[dict] = []  # {"time", "path", "auth", "body", "images"}
        self.lock = threading.Lock()

    def start(self):
        state = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                if self.path.rstrip("/") != "/v1/models":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                self._send(200, {"object": "list", "data": [{"id": SERVED, "object": "model"}]})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                record = {"time": time.monotonic(), "path": self.path, "auth": self.headers.get("Authorization")}
                with state.lock:
                    state.requests.append(record)
                    scripted = state.script.pop(0) if state.script else None
                if scripted:
                    status, headers, body = scripted
                    return self._send(status, body, headers)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if state.api_key and record["auth"] != f"Bearer {state.api_key}":
                    presented = (record["auth"] or "").removeprefix("Bearer ")
                    # Like some real servers, echo the presented key: the client must not pass it on.
                    return self._send(401, {"error": {"message": f"Incorrect API key provided: {presented}",
                                                      "code": "invalid_api_key"}})
                body = json.loads(raw)
                if body.get("model") != SERVED:
                    return self._send(404, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                                                      "code": "model_not_found"}})
                images = [decode_data_url(part["image_url"]["url"])
                          for m in body["messages"] if isinstance(m["content"], list)
                          for part in m["content"] if part["type"] == "image_url"]
                record.update(body=body, images=images)
                time.sleep(state.delay)
                text = state.backend(body["messages"], images, body)
                # A backend may also say how the reply ended: (text, finish_reason, completion_tokens).
                text, finish, tokens = text if isinstance(text, tuple) else (text, "stop", 3)
                self._send(200, {"id": "cmpl-1", "object": "chat.completion", "model": SERVED,
                                 "choices": [{"index": 0, "finish_reason": finish,
                                              "message": {"role": "assistant", "content": text}}],
                                 "usage": {"prompt_tokens": 11, "completion_tokens": tokens,
                                           "total_tokens": 11 + tokens}})

            def _send(self, status, payload, headers=None):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def decode_data_url(url: str) -> Image.Image:
    head, b64 = url.split(",", 1)
    assert head in ("data:image/png;base64", "data:image/jpeg;base64"), head
    img = Image.open(io.BytesIO(base64.b64decode(b64, validate=True)))
    img.load()
    return img


def describe_request(messages, images, body) -> str:
    texts = []
    for m in messages:
        parts = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        texts += [p["text"] for p in parts if p["type"] == "text"]
    if any(t.startswith("sleep:") for t in texts):
        time.sleep(float(next(t for t in texts if t.startswith("sleep:"))[6:]))
    shapes = ",".join(f"{im.format}:{im.width}x{im.height}" for im in images)
    return f"images=[{shapes}] text={' | '.join(texts)}"


@pytest.fixture
def server():
    srv = ChatServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server, monkeypatch):
    monkeypatch.setenv(ENV, KEY)

    def make(**options):
        opts = {"model": SERVED, "api_key": f"env:{ENV}", "backoff_base": 0.01, "timeout": 5, **options}
        return load_model(ModelSpec(kind="mllm", family="openai-compatible", source=server.base_url,
                                    options=opts), LoadOptions())

    return make


def _photo(w, h, seed=0) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8))


def test_happy_path_images_arrive_intact(server, client):
    mllm = client(image_format="PNG")
    assert isinstance(mllm, MultimodalLLM) and mllm.info.family == "openai-compatible"
    photo = _photo(120, 80)
    reply = mllm.chat([ChatMessage.system("Be brief."), ChatMessage.user(photo, "What is this?")],
                      max_new_tokens=33, seed=5)
    assert reply == "images=[PNG:120x80] text=Be brief. | What is this?"
    req = server.requests[-1]
    assert req["auth"] == f"Bearer {KEY}"
    assert np.array_equal(np.asarray(req["images"][0].convert("RGB")), np.asarray(photo))  # lossless PNG
    body = req["body"]
    assert body["max_tokens"] == 33 and body["temperature"] == 0.0 and body["seed"] == 5
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}  # text-only -> plain string
    assert mllm.last_usage["total_tokens"] == 14


def test_jpeg_by_default_and_max_image_side(server, client):
    mllm = client(max_image_side=256)
    reply = mllm.chat([ChatMessage.user(_photo(1200, 800), "a", _photo(100, 50, 1), "b")])
    assert reply == "images=[JPEG:256x171,JPEG:100x50] text=a | b"


def test_model_name_defaults_to_the_only_served_model(server, monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    mllm = OpenAICompatibleMLLM(server.base_url, api_key_ref=f"env:{ENV}")
    assert mllm.model == SERVED and mllm.chat([ChatMessage.user("hi")]) == "images=[] text=hi"


def test_bare_host_gets_v1(server, monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    mllm = OpenAICompatibleMLLM(server.base_url.removesuffix("/v1"), SERVED, api_key_ref=f"env:{ENV}")
    assert mllm.base_url == server.base_url


def test_retries_after_two_503_then_succeeds(server, client):
    server.script = [(503, {}, b'{"error": {"message": "overloaded"}}')] * 2
    assert client().chat([ChatMessage.user("hello")]) == "images=[] text=hello"
    assert len(server.requests) == 3


def test_gives_up_after_max_retries(server, client):
    server.script = [(502, {}, b"bad gateway")] * 3
    with pytest.raises(ModelError, match=r"kept failing \(HTTP 502\) after 3 attempts"):
        client(max_retries=2).chat([ChatMessage.user("hello")])
    assert len(server.requests) == 3


def test_429_honours_retry_after(server, client):
    server.script = [(429, {"Retry-After": "1"}, b'{"error": {"message": "slow down"}}')]
    assert client(backoff_base=0.0).chat([ChatMessage.user("x")]) == "images=[] text=x"
    first, second = server.requests
    assert second["time"] - first["time"] >= 0.9


def test_429_asking_for_a_long_wait_fails_at_once(server, client):
    server.script = [(429, {"Retry-After": "3600"}, b"{}")]
    start = time.monotonic()
    with pytest.raises(ModelError, match="rate-limiting requests and asks to wait 3600 s"):
        client().chat([ChatMessage.user("x")])
    assert time.monotonic() - start < 2 and len(server.requests) == 1


def test_wrong_key_names_the_variable_and_never_shows_the_key(server, client, monkeypatch):
    server.api_key = "the-right-key-123456"
    with pytest.raises(ModelError) as err:
        client().chat([ChatMessage.user("x")])
    e = err.value
    assert "rejected the API key (HTTP 401)" in e.message and f"environment variable {ENV}" in e.hint
    everything = " ".join([str(e), e.message, e.hint or "", e.detail or "", repr(e.to_dict())])
    assert KEY not in everything
    assert "Incorrect API key provided" in e.detail  # the server's words survive, minus the key
    assert len(server.requests) == 1  # auth failures are not retried


def test_missing_key_says_how_to_configure_one(server):
    mllm = OpenAICompatibleMLLM(server.base_url, SERVED)  # no api_key reference at all
    with pytest.raises(ModelError, match="requires an API key, and none was sent") as err:
        mllm.chat([ChatMessage.user("x")])
    assert "env:" in err.value.hint


def test_unset_env_variable_is_a_config_error_before_any_request(server, monkeypatch):
    monkeypatch.delenv("NEMO_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ConfigError, match="NEMO_TEST_UNSET_KEY"):
        OpenAICompatibleMLLM(server.base_url, SERVED, api_key_ref="env:NEMO_TEST_UNSET_KEY")
    assert server.requests == []


def test_unknown_model_lists_what_is_served(server, client):
    with pytest.raises(ModelError) as err:
        client(model="gpt-imaginary").chat([ChatMessage.user("x")])
    assert "'gpt-imaginary' is not served" in err.value.message and SERVED in err.value.hint


def test_timeout_is_a_clear_error(server, client):
    server.delay = 2.0
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"did not answer within 0.3 s") as err:
        client(timeout=0.3).chat([ChatMessage.user("x")])
    assert "timeout" in err.value.hint and time.monotonic() - start < 1.9


def test_connection_refused_after_retries():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    mllm = OpenAICompatibleMLLM(f"http://127.0.0.1:{port}/v1", "m", max_retries=2, backoff_base=0.01)
    with pytest.raises(ModelError, match=r"Could not connect to .*3 attempts") as err:
        mllm.chat([ChatMessage.user("x")])
    assert "server running" in err.value.hint


@pytest.mark.parametrize("body", [b"<html>proxy error</html>", b'{"choices": []}', b'{"object": "chat.completion"}',
                                  b'{"choices": [{"message": {"role": "assistant", "content": null}}]}'])
def test_malformed_reply(server, client, body):
    server.script = [(200, {}, body)]
    with pytest.raises(MalformedOutputError):
        client().chat([ChatMessage.user("x")])


def test_chat_batch_keeps_the_order_of_the_inputs(server, client):
    mllm = client(concurrency=4)
    delays = [0.4, 0.0, 0.2, 0.1]  # the first request finishes last
    convs = [[ChatMessage.user(f"sleep:{d}", _photo(10 + i, 10))] for i, d in enumerate(delays)]
    start = time.monotonic()
    replies = mllm.chat_batch(convs)
    assert replies == [f"images=[JPEG:{10 + i}x10] text=sleep:{d}" for i, d in enumerate(delays)]
    assert time.monotonic() - start < sum(delays)  # they really ran concurrently
    assert mllm.chat_batch([]) == []


def test_api_key_never_reaches_the_logs(server, client, caplog):
    caplog.set_level(logging.DEBUG)
    server.script = [(503, {}, b"{}")]
    mllm = client()
    mllm.chat([ChatMessage.user(_photo(20, 20), "x")])
    server.api_key = "another-key-entirely-42"
    with pytest.raises(ModelError):
        mllm.chat([ChatMessage.user("x")])
    logged = caplog.text + " ".join(str(r.args) for r in caplog.records)
    assert "retrying" in logged  # the retry was logged ...
    assert KEY not in logged  # ... without the key


def test_serves_a_real_tiny_model_end_to_end(server, client, tmp_path):
    """The server runs a tiny Qwen2-VL on what it decoded; the HTTP answer equals a direct local call."""
    from fixtures_tiny.mllm import build_tiny_qwen_vl

    local = load_model(ModelSpec(kind="mllm", family="transformers-mllm",
                                 source=str(build_tiny_qwen_vl(tmp_path, "qwen2_vl"))), LoadOptions(device="cpu"))

    def run_tiny_model(messages, images, body):
        pending = iter(images)
        convo = [ChatMessage(m["role"], [m["content"]] if isinstance(m["content"], str) else
                             [p["text"] if p["type"] == "text" else next(pending).convert("RGB")
                              for p in m["content"]]) for m in messages]
        return local.chat(convo, max_new_tokens=body["max_tokens"], temperature=body["temperature"])

    server.backend = run_tiny_model
    convo = [ChatMessage.system("You explain classifier errors."), ChatMessage.user(_photo(64, 48), "Why?")]
    assert client(image_format="PNG").chat(convo, max_new_tokens=6) == local.chat(convo, max_new_tokens=6)


# -- replies cut at max_tokens (issue 27 §3) -------------------------------------------------------------------
WHOLE = '{"cause_of_error": "The model reads the blue ink as the colour of eights."}'


def cut_below(limit: int):
    """A server whose model needs `limit` tokens: fewer, and its reply is cut there ("length")."""
    def backend(messages, images, body):
        if body["max_tokens"] < limit:
            return WHOLE[:len('{"cause_of_error": "The model')], "length", body["max_tokens"]
        return WHOLE, "stop", 17
    return backend


def _draw_one(mllm, max_new_tokens):
    from nemo_desktop.core.base.job_context import null_context
    from nemo_desktop.core.methods.intervention import UnitCache
    from nemo_desktop.core.methods.prompts import load_prompt
    from nemo_desktop.core.methods.validation import candidate_counts, draw_hypotheses

    cands, outcomes, _ = draw_hypotheses(
        null_context(), UnitCache(None), mllm, [ChatMessage.user(_photo(32, 32), "Why? Answer in JSON.")], m=1,
        key_parts={}, prompt=load_prompt("scitx_hypothesis"), repair=load_prompt("json_repair"), seed=0,
        sampling=None, max_extra_draws=0, max_new_tokens=max_new_tokens)
    return cands[0], outcomes[0], candidate_counts(cands)


def test_the_reply_says_how_it_ended(server, client):
    server.backend = cut_below(64)
    cut = client().chat([ChatMessage.user("Why?")], max_new_tokens=32)
    assert cut == '{"cause_of_error": "The model' and (cut.finish_reason, cut.completion_tokens) == ("length", 32)
    whole = client().chat([ChatMessage.user("Why?")], max_new_tokens=64)
    assert whole == WHOLE and (whole.finish_reason, whole.completion_tokens) == ("stop", 17)


def test_a_hypothesis_cut_at_max_tokens_is_asked_again_with_twice_the_budget(server, client):
    server.backend = cut_below(64)
    cand, outcome, counts = _draw_one(client(), 32)
    assert cand.hypothesis == "The model reads the blue ink as the colour of eights." and cand.error is None
    assert [r["body"]["max_tokens"] for r in server.requests] == [32, 64]  # the retry, and no repair turn
    assert outcome["finish_reason"] == "stop" and outcome["cut_off_reply"] == '{"cause_of_error": "The model'
    assert counts["cut_off"] == 0 and counts["no_hypothesis"] == 0


def test_a_hypothesis_cut_again_is_marked_and_not_repaired(server, client):
    server.backend = cut_below(10_000)
    cand, outcome, counts = _draw_one(client(), 32)
    assert cand.hypothesis == "" and outcome["hypothesis"] is None and outcome["repair_reply"] is None
    assert cand.error == "Reply cut off at 64 tokens (asked with 32, then once more with 64); not read as an answer."
    assert [r["body"]["max_tokens"] for r in server.requests] == [32, 64]
    assert (counts["cut_off"], counts["no_hypothesis"]) == (1, 0)


def test_length_with_a_whole_object_is_taken_and_stop_inside_an_object_is_not_repaired(server, client):
    server.backend = lambda messages, images, body: (WHOLE + " And furthermore", "length", body["max_tokens"])
    cand, _, _ = _draw_one(client(), 32)
    assert cand.hypothesis.startswith("The model reads") and len(server.requests) == 1  # closed by the model

    # Ended ("stop") inside an object: still a fragment, which the repair turn would only close.
    server.requests.clear()
    server.backend = lambda messages, images, body: ('{"cause_of_error": "The model', "stop", 9)
    cand, outcome, counts = _draw_one(client(), 32)
    assert [r["body"]["max_tokens"] for r in server.requests] == [32, 64] and outcome["repair_reply"] is None
    assert cand.error.startswith("Reply cut off: it stops inside an unterminated JSON object (asked with 32")
    assert (counts["cut_off"], counts["no_hypothesis"]) == (1, 0)


def test_chat_requests_sends_each_with_its_own_settings_at_once(server, client):
    """Issue 40: a greedy request next to seeded draws goes out concurrently, each body with its own fields."""
    from nemo_desktop.core.models.protocols import ChatRequest

    mllm = client(concurrency=3)
    requests = [ChatRequest([ChatMessage.user("sleep:0.3")], 20),
                ChatRequest([ChatMessage.user("sleep:0.3")], 20, 0.7, 1001, 0.95, 0, 0.0),
                ChatRequest([ChatMessage.user("sleep:0.3")], 20, 0.7, 1002, 0.95, 0, 0.0)]
    start = time.monotonic()
    replies = mllm.chat_requests(requests)
    assert time.monotonic() - start < 0.85  # concurrent, not 3 x 0.3 s
    assert len(replies) == 3
    bodies = sorted((r["body"] for r in server.requests), key=lambda b: b.get("seed") or 0)
    assert "temperature" not in bodies[0] or bodies[0]["temperature"] == 0
    assert [(b.get("seed"), b.get("temperature")) for b in bodies[1:]] == [(1001, 0.7), (1002, 0.7)]
