"""Figures for the reliability page (docs/reference/reliability.md): how long a trickling or silent endpoint can
hold a request, how quickly a cancel interrupts one, and how much `nemo cache salvage` recovers from a damaged database.

usage: python benchmarks/fault_figures.py [--trials 5]
Loopback servers and a temporary store only; prints one line per figure.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import socket
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

from nemo_desktop.core.base.errors import JobCancelled, ModelError
from nemo_desktop.core.base.job_context import CancelToken, cancel_scope
from nemo_desktop.core.models.adapters.openai_compatible import OpenAICompatibleMLLM
from nemo_desktop.core.models.protocols import ChatMessage
from nemo_desktop.core.store import ResultsStore
from nemo_desktop.core.store.salvage import salvage_into


def serve(behave) -> tuple[str, socket.socket]:
    sock = socket.create_server(("127.0.0.1", 0))

    def accept():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=lambda: _guard(behave, conn), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1", sock


def _guard(behave, conn):
    with conn:
        try:
            behave(conn)
        except OSError:
            pass


def trickle(conn, every_s=0.9):
    conn.recv(65536)
    body = b'{"choices": [{"message": {"content": "a dog"}}]}'
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
    for i in range(len(body)):
        time.sleep(every_s)
        conn.sendall(body[i:i + 1])


def silent(conn):
    conn.recv(65536)
    time.sleep(60)


def held_seconds(url, timeout) -> float:
    start = time.monotonic()
    try:
        OpenAICompatibleMLLM(url, "m", timeout=timeout, max_retries=0).chat([ChatMessage.user("x")])
    except ModelError:
        pass
    return time.monotonic() - start


def cancel_latency(url) -> float:
    after = 0.3 + random.random() * 0.2  # not in step with the watchdog's 50 ms polls
    token, out = CancelToken(), {}

    def run():
        try:
            with cancel_scope(token):
                OpenAICompatibleMLLM(url, "m", timeout=60, max_retries=0).chat([ChatMessage.user("x")])
        except JobCancelled:
            out["at"] = time.monotonic()

    t = threading.Thread(target=run)
    t.start()
    time.sleep(after)
    cancelled_at = time.monotonic()
    token.cancel()
    t.join()
    return out["at"] - cancelled_at


def salvage_fraction(n=500, damaged_pages=1) -> tuple[int, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "results.sqlite"
        with ResultsStore.open(db_path=db) as store:
            for i in range(n):
                store.put(f"{i:06d}" + "k" * 58, "explanation", {"i": i, "text": "x" * 1500}, {"a": f"{i}".encode()})
        with sqlite3.connect(db) as conn:
            page = conn.execute("PRAGMA page_size").fetchone()[0]
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = db.stat().st_size // page
        with open(db, "r+b") as f:
            f.write(b"DAMAGED-HEADER!!")
            for k in range(damaged_pages):
                f.seek(page * (pages * (k + 1) // (damaged_pages + 1)))
                f.write(os.urandom(page))
        with ResultsStore.open(db_path=db) as store:
            report = salvage_into(store, store.recovered_from)
        return report.results, n, pages


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    logging.getLogger("nemo_desktop").setLevel(logging.ERROR)  # the moved-aside warnings are expected here
    url, s1 = serve(trickle)
    held = [held_seconds(url, 2.0) for _ in range(args.trials)]
    print(f"trickling server (1 byte / 0.9 s), timeout 2 s: request held {statistics.median(held):.2f} s "
          f"(median of {args.trials}; max {max(held):.2f} s)")
    url2, s2 = serve(silent)
    lat = [cancel_latency(url2) for _ in range(max(args.trials, 10))]
    print(f"cancel of a request in flight: interrupted after {1e3 * statistics.median(lat):.0f} ms "
          f"(median of {len(lat)}; max {1e3 * max(lat):.0f} ms)")
    s1.close()
    s2.close()
    for pages in (1, 5):
        got, n, total = salvage_fraction(damaged_pages=pages)
        print(f"salvage: {got} of {n} results recovered from a {total}-page database with its header and "
              f"{pages} data page(s) overwritten")


if __name__ == "__main__":
    main()
