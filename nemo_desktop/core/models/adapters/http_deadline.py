"""One HTTP exchange bounded as a whole: connect, send, headers and the full body must finish within the
timeout, and a job's cancel token interrupts it at any point.

A socket timeout alone (what `urlopen(timeout=...)` gives, and what requests/httpx/urllib3 give too) bounds
each read, not the exchange: a server trickling one byte every 0.9 s holds a 2 s client forever. So a
watchdog thread shuts the connection's socket down at the deadline or on cancel; the blocked call returns at
once and the exchange fails with `TimeoutError` or `JobCancelled`. Name resolution (getaddrinfo) cannot be
interrupted this way; connecting is bounded by the remaining time as a socket timeout.
"""
from __future__ import annotations

import contextlib
import functools
import http.client
import io
import socket
import threading
import time
import urllib.error
import urllib.request

from ...base.errors import JobCancelled
from ...base.job_context import CancelToken

_POLL_S = 0.05  # how quickly a cancel is noticed


class _Watchdog:
    def __init__(self, timeout: float, cancel: CancelToken | None):
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.cancel = cancel
        self.fired: str | None = None  # "timeout" | "cancelled"
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemo-http-deadline", daemon=True)
        self._thread.start()

    def remaining(self) -> float:
        return max(0.001, self.deadline - time.monotonic())

    def attach(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.fired:
                self._shut()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(min(_POLL_S, max(0.0, self.deadline - time.monotonic()))):
            if self.cancel is not None and self.cancel.cancelled:
                reason = "cancelled"
            elif time.monotonic() >= self.deadline:
                reason = "timeout"
            else:
                continue
            with self._lock:
                self.fired = reason
                self._shut()
            return

    def _shut(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)  # wakes a recv/send blocked in another thread

    def raise_if_fired(self) -> None:
        if self.fired == "cancelled":
            raise JobCancelled("Cancelled while waiting for the model endpoint.")
        if self.fired == "timeout":
            raise TimeoutError(f"no complete answer within {self.timeout:g} s")


class _Watched:
    """Mixed into an http.client connection: its socket is handed to the watchdog once connected."""

    def __init__(self, *args, watch: _Watchdog, **kw):
        super().__init__(*args, **kw)
        self._watch = watch

    def connect(self) -> None:
        super().connect()
        self._watch.attach(self.sock)


class _WatchedHTTPConnection(_Watched, http.client.HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watch: _Watchdog):
        super().__init__()
        self._watch = watch

    def http_open(self, req):
        return self.do_open(functools.partial(_WatchedHTTPConnection, watch=self._watch), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watch: _Watchdog):
        super().__init__()
        self._watch = watch

    def https_open(self, req):
        return self.do_open(functools.partial(_WatchedHTTPSConnection, watch=self._watch), req,
                            context=self._context)


def fetch(request: urllib.request.Request, *, timeout: float, cancel: CancelToken | None = None) -> bytes:
    """The full response body of `request`, as `urlopen(request).read()` would return it, with the whole
    exchange bounded by `timeout` seconds and interrupted by `cancel`.

    Raises what urlopen raises (`urllib.error.HTTPError` with its body already read, `URLError`), plus
    `TimeoutError` at the deadline and `JobCancelled` on cancel."""
    if cancel is not None:
        cancel.raise_if_cancelled()
    watch = _Watchdog(timeout, cancel)
    opener = urllib.request.build_opener(_HTTPHandler(watch), _HTTPSHandler(watch))
    try:
        try:
            with opener.open(request, timeout=watch.remaining()) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()  # still under the watchdog: an error page may trickle too
            watch.stop()
            watch.raise_if_fired()
            raise urllib.error.HTTPError(exc.url, exc.code, exc.msg, exc.headers, io.BytesIO(body)) from None
        except BaseException:
            watch.stop()
            watch.raise_if_fired()  # the shut-down socket's error is not the story: the deadline or cancel is
            raise
    finally:
        watch.stop()
    watch.raise_if_fired()  # a body without a length ends "cleanly" when its socket is shut: still too late
    return body
