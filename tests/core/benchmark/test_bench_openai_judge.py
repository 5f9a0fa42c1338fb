"""An LLM Match judge behind the OpenAI-compatible adapter, against a real HTTP server on 127.0.0.1 (a test
double: it answers judge prompts in messy formats, and once with an unreadable reply that must be retried)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench_world import base_config, doubles_loader
from nemo_desktop.core.benchmark.config import parse_config
from nemo_desktop.core.benchmark.records import DONE
from nemo_desktop.core.benchmark.runner import BenchmarkRunner

KEY_ENV = "NEMO_TEST_JUDGE_KEY"
KEY = "judge-" + "x1y2" * 5


@pytest.fixture
def judge_server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    state = {"requests": [], "first": True, "reasoning": False}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, obj):
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "judge-mini", "object": "model"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.headers["Authorization"] == f"Bearer {KEY}"
            state["requests"].append(body)
            refused = state["reasoning"] and ("max_tokens" if "max_tokens" in body else
                                              "temperature" if body.get("temperature", 1) != 1 else None)
            if refused:  # an OpenAI reasoning model: HTTP 400 naming the parameter
                data = json.dumps({"error": {"message": f"Unsupported parameter: '{refused}' is not supported "
                                                        "with this model.", "type": "invalid_request_error",
                                             "param": refused, "code": "unsupported_parameter"}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            user = body["messages"][-1]["content"]
            text = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user)
            if state["first"]:  # the very first answer is unreadable: the judge must ask again
                state["first"] = False
                reply = "Let me think about it."
            elif "could not be read" in text:
                reply = 'Sorry! ```json\n{"reasoning": "the style is named", "score": "1/1"}\n```'
            else:
                reply = "The explanation names the cartoon rendition.\nScore: **1.0**"
            self._send({"id": "x", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                     "finish_reason": "stop"}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    server.shutdown()
    server.server_close()


def test_openai_compatible_judge_in_a_run(bench_data, store, judge_server):
    url, state = judge_server
    cfg = base_config(bench_data, datasets=base_config(bench_data)["datasets"][:1],
                      judges={"Hosted": {"model": {"family": "openai-compatible", "source": url,
                                                   "options": {"model": "judge-mini", "api_key": f"env:{KEY_ENV}"}}},
                              "GPT": "test-double:judge-gpt-fenced"})
    s = BenchmarkRunner(parse_config(cfg), store, loader=doubles_loader()).run()
    assert s.statuses == {DONE: 4}
    verdict_keys = set()
    for it in store.run_items(s.run_id):
        p = store.get(it["result_key"]).payload["llm_match"]
        assert p["score"] == 1.0 and p["judges"]["Hosted"]["status"] == "scored"
        verdict_keys.add(p["judges"]["Hosted"]["key"])
    retried = [store.get(k).payload for k in verdict_keys if len(store.get(k).payload["replies"]) > 1]
    assert len(retried) == 1 and retried[0]["replies"][0] == "Let me think about it."
    assert all(r["temperature"] == 0.0 for r in state["requests"])
    assert KEY not in json.dumps([store.get(k).payload for k in verdict_keys])  # the key is never stored
    assert all(len(r["messages"]) in (1, 3) for r in state["requests"])  # prompt, or prompt + reply + repair


def test_a_judge_behind_a_reasoning_model_endpoint_still_scores(bench_data, store, judge_server):
    """The server refuses max_tokens and temperature 0 (HTTP 400 naming them): the run's judge adjusts."""
    url, state = judge_server
    state["reasoning"], state["first"] = True, False
    cfg = base_config(bench_data, datasets=base_config(bench_data)["datasets"][:1],
                      judges={"Hosted": {"model": {"family": "openai-compatible", "source": url,
                                                   "options": {"model": "judge-mini", "api_key": f"env:{KEY_ENV}"}}}})
    s = BenchmarkRunner(parse_config(cfg), store, loader=doubles_loader()).run()
    assert s.statuses == {DONE: 4}
    for it in store.run_items(s.run_id):
        p = store.get(it["result_key"]).payload["llm_match"]
        assert p["score"] == 1.0 and p["judges"]["Hosted"]["status"] == "scored"
    refused, accepted = state["requests"][:2], state["requests"][2:]  # (equal explanations share a verdict)
    assert "max_tokens" in refused[0] and "temperature" in refused[1] and accepted
    assert all("max_completion_tokens" in r and "temperature" not in r for r in accepted)
