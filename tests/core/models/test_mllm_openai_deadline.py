"""The OpenAI-compatible client against endpoints that misbehave at the socket level (loopback servers):
the timeout bounds the whole request (connect, send, headers, full body), a cancel interrupts a request in
flight, and every failure names the endpoint."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from nemo_desktop.core.base.errors import JobCancelled, MalformedOutputError, ModelError
from nemo_desktop.core.base.job_context import CancelToken, cancel_scope
from nemo_desktop.core.models.adapters.openai_compatible import OpenAICompatibleMLLM
from nemo_desktop.core.models.protocols import ChatMessage

REPLY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "a dog"}}]}).encode()


class RawServer:
    """A loopback TCP server whose every connection is handled by `behave(conn)` in its own thread."""

    def __init__(self, behave):
        self.behave = behave
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            try:
                self.behave(conn, self.stopping)
            except OSError:
                pass  # the client hung up: expected

    def close(self):
        self.stopping.set()
        self.sock.close()


def read_request(conn) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += conn.recv(65536)
    return body


def trickle(data: bytes, every_s: float, *, at_once: bytes = b""):
    """Read the request, send `at_once`, then `data` one byte every `every_s` seconds."""
    def behave(conn, stopping):
        read_request(conn)
        conn.sendall(at_once)
        for i in range(len(data)):
            if stopping.wait(every_s):
                return
            conn.sendall(data[i:i + 1])
    return behave


def ok_headers(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\n\r\n")


@pytest.fixture
def raw_server():
    servers = []

    def start(behave):
        servers.append(RawServer(behave))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def client(url, **kw) -> OpenAICompatibleMLLM:
    return OpenAICompatibleMLLM(url, "m", max_retries=0, **kw)


@pytest.mark.parametrize("what", ["body", "headers"])
def test_a_trickling_server_cannot_hold_the_client_past_its_timeout(raw_server, what):
    # One byte every 0.25 s: each read is quick, so a per-read timeout never fires; the reply takes ~20 s.
    server = raw_server(trickle(ok_headers(REPLY) + REPLY, 0.25) if what == "headers" else
                        trickle(REPLY, 0.25, at_once=ok_headers(REPLY)))
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"did not answer within 1 s") as err:
        client(server.url, timeout=1.0).chat([ChatMessage.user("x")])
    elapsed = time.monotonic() - start
    assert 0.9 < elapsed < 1.5, elapsed
    assert server.url in err.value.message


def test_a_server_that_never_reads_the_request_cannot_hold_the_send(raw_server):
    server = raw_server(lambda conn, stop: stop.wait(30))  # accepts, never reads: the send buffers fill up
    big = [ChatMessage.user("x" * 30_000_000)]
    start = time.monotonic()
    with pytest.raises(ModelError, match="did not answer within"):
        client(server.url, timeout=1.0).chat(big)
    assert time.monotonic() - start < 2.5  # ~1 s plus JSON-encoding 30 MB


def test_slow_but_steady_answer_within_the_timeout_still_works(raw_server):
    server = raw_server(trickle(REPLY, 0.002, at_once=ok_headers(REPLY)))
    assert client(server.url, timeout=5.0).chat([ChatMessage.user("x")]) == "a dog"


def test_cancel_interrupts_a_request_in_flight(raw_server):
    server = raw_server(lambda conn, stop: (read_request(conn), stop.wait(30)))  # never answers
    token, outcome = CancelToken(), {}

    def run():
        start = time.monotonic()
        try:
            with cancel_scope(token):
                client(server.url, timeout=60.0).chat_batch([[ChatMessage.user("a")], [ChatMessage.user("b")]])
        except BaseException as exc:  # noqa: BLE001
            outcome["exc"] = exc
        outcome["seconds"] = time.monotonic() - start

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    token.cancel()
    t.join(5)
    assert not t.is_alive() and isinstance(outcome["exc"], JobCancelled)
    assert outcome["seconds"] < 1.0


def test_cancel_interrupts_the_wait_between_retries(raw_server):
    def busy(conn, stop):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 503 Busy\r\nRetry-After: 30\r\nContent-Length: 0\r\n\r\n")

    server = raw_server(busy)
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    start = time.monotonic()
    with pytest.raises(JobCancelled), cancel_scope(token):
        OpenAICompatibleMLLM(server.url, "m", max_retries=2, max_retry_after=60).chat([ChatMessage.user("x")])
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize("reply", [b'{"choices": []}', b'{"object": "chat.completion"}',
                                   b'{"choices": [{"message": {"role": "assistant", "content": null}}]}'])
def test_malformed_replies_name_the_endpoint(raw_server, reply):
    server = raw_server(lambda conn, stop: (read_request(conn), conn.sendall(ok_headers(reply) + reply)))
    with pytest.raises(MalformedOutputError) as err:
        client(server.url).chat([ChatMessage.user("x")])
    assert server.url in err.value.message
