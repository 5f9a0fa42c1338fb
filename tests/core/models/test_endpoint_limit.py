"""max_in_flight: a loopback OpenAI-compatible server counts the requests it holds at once; the adapter's limit
holds across threads, across adapter instances and across processes of one machine."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.models.adapters.endpoint_limit import EndpointLimiter
from nemo_desktop.core.models.protocols import ChatMessage
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

SERVED = "Qwen/Qwen2.5-VL-7B-Instruct"
REPO = Path(__file__).resolve().parents[3]


class CountingServer:
    """Answers every chat completion after `delay` seconds and records the most requests held at once."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.now = self.peak = self.total = 0
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        state = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._send({"object": "list", "data": [{"id": SERVED, "object": "model", "owned_by": "vllm"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with state.lock:
                    state.bodies.append(body)
                    state.now += 1
                    state.total += 1
                    state.peak = max(state.peak, state.now)
                time.sleep(state.delay)
                with state.lock:
                    state.now -= 1
                self._send({"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

            def _send(self, body):
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = CountingServer(delay=0.25)
    yield s
    s.close()


def adapter(url: str, **options):
    spec = ModelSpec(kind="mllm", family="openai-compatible", source=url, options={"model": SERVED, **options})
    return load_model(spec, LoadOptions(device="cpu"))


def conversations(n: int):
    return [[ChatMessage(role="user", content=[f"question {i}"])] for i in range(n)]


def test_without_a_limit_the_batch_concurrency_reaches_the_server(server):
    mllm = adapter(server.url, concurrency=4)
    assert mllm.chat_batch(conversations(8), max_new_tokens=8) == ["ok"] * 8
    assert server.peak == 4  # the control: what the limit below must cut down


def test_limit_holds_across_threads_and_adapter_instances(server):
    a, b = adapter(server.url, concurrency=4, max_in_flight=2), adapter(server.url, concurrency=4, max_in_flight=2)
    out: dict[str, list[str]] = {}

    def batch(key, mllm):
        out[key] = mllm.chat_batch(conversations(6), max_new_tokens=8)

    threads = [threading.Thread(target=batch, args=(k, m)) for k, m in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == {"a": ["ok"] * 6, "b": ["ok"] * 6}
    assert server.total == 12 and server.peak == 2


CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    from nemo_desktop.core.models.protocols import ChatMessage
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model
    spec = ModelSpec(kind="mllm", family="openai-compatible", source={url!r},
                     options={{"model": {model!r}, "concurrency": 4, "max_in_flight": 3}})
    m = load_model(spec, LoadOptions(device="cpu"))
    print(m.chat_batch([[ChatMessage(role="user", content=[str(i)])] for i in range(8)], max_new_tokens=8).count("ok"))
""")


def test_limit_holds_across_processes(server):
    code = CHILD.format(repo=str(REPO), url=server.url, model=SERVED)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [o[0].strip() for o in outs] == ["8", "8"]
    assert server.total == 16
    assert server.peak <= 3  # two processes of concurrency 4: up to 8 at once without the shared slots


def test_a_cancelled_job_stops_waiting_for_a_slot(tmp_path):
    from nemo_desktop.core.base.errors import JobCancelled
    from nemo_desktop.core.base.job_context import CancelToken, cancel_scope

    limiter = EndpointLimiter("http://127.0.0.1:9/v1", 1, folder=tmp_path)
    token = CancelToken()
    with limiter.slot():
        threading.Timer(0.2, token.cancel).start()
        t0 = time.monotonic()
        with pytest.raises(JobCancelled), cancel_scope(token), limiter.slot():
            pass
        assert time.monotonic() - t0 < 5
    with limiter.slot() as number:  # the slot the first holder released is free again
        assert number == 0


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "4"])
def test_a_bad_limit_is_a_config_error(bad, server):
    with pytest.raises(ConfigError, match="max_in_flight"):
        adapter(server.url, max_in_flight=bad)


def test_the_documented_vllm_entry_of_table1_sends_distinct_sampled_draws(server):
    """The commented served-MLLM line of the shipped table1.toml (README: serving the MLLM with vLLM) parses,
    loads, and sends what a vLLM server needs so SciTX's candidate draws differ: every sampling field, top_k
    off as -1 (overriding Qwen2.5-VL's top_k=1), and a distinct seed per draw."""
    import tomllib

    from nemo_desktop.core.benchmark.config import ModelRef
    from nemo_desktop.core.base.resources import resource_path

    text = resource_path("benchmarks", "configs", "table1.toml").read_text(encoding="utf-8")
    line = next(l for l in text.splitlines() if l.startswith('# "Qwen2.5-VL-7B" = {'))
    ref = tomllib.loads(line.removeprefix("# "))["Qwen2.5-VL-7B"]
    spec = ModelRef("Qwen2.5-VL-7B", "mllm", ref).spec()
    assert spec.source == "http://localhost:8000/v1" and spec.options["model"] == SERVED
    spec = ModelSpec(spec.kind, spec.family, server.url, spec.revision, spec.options)
    mllm = load_model(spec, LoadOptions(device="cpu"))
    assert mllm.limiter is not None and mllm.limiter.limit == 32
    for draw in (1, 2):
        mllm.chat(conversations(1)[0], max_new_tokens=16, temperature=0.7, top_p=0.95, top_k=0, min_p=0.0,
                  seed=1000 + draw)
    sent = [{k: b[k] for k in ("temperature", "top_p", "top_k", "min_p", "seed")} for b in server.bodies]
    assert sent == [{"temperature": 0.7, "top_p": 0.95, "top_k": -1, "min_p": 0.0, "seed": 1001},
                    {"temperature": 0.7, "top_p": 0.95, "top_k": -1, "min_p": 0.0, "seed": 1002}]
