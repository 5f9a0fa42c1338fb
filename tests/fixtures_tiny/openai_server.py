"""A loopback OpenAI-compatible server for tests (a test double, never shipped): GET /v1/models lists `models`
(owned_by "vllm"), POST /v1/chat/completions answers with the model name and the last user text it received.
`html=True` makes it a web server that is not an OpenAI-compatible API (every GET answers an HTML page)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackOpenAI:
    def __init__(self, models=("tiny/vl-model",), html: bool = False):
        self.models = list(models)
        self.html = html
        self.requests: list[tuple[str, str, dict | None]] = []  # (method, path, body)

    def start(self) -> "LoopbackOpenAI":
        state = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, payload, kind="application/json"):
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                state.requests.append(("GET", self.path, None))
                if state.html:
                    return self._send(200, "<html><body>a web page</body></html>", "text/html")
                if self.path.rstrip("/") != "/v1/models":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "vllm"}
                                                            for m in state.models]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                state.requests.append(("POST", self.path, body))
                if self.path != "/v1/chat/completions" or body.get("model") not in state.models:
                    return self._send(404, {"error": {"message": "not found"}})
                last = body["messages"][-1]["content"]
                text = last if isinstance(last, str) else " ".join(p.get("text", "") for p in last)
                self._send(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant",
                                                          "content": f"{body['model']} heard: {text}"}}],
                                 "usage": {"prompt_tokens": 3, "completion_tokens": 4}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """A loopback URL where nothing listens (a port just released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
