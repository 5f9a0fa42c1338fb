"""At most N requests in flight to one endpoint from this machine, whatever their thread or process.

Many benchmark workers (threads of chat_batch, `--shard` processes, Ray actors on one node) can share one
vLLM or SGLang server. A server takes whatever arrives and queues it; past its batch capacity every request
waits longer and timeouts fire. The adapter option `max_in_flight = N` bounds the requests a machine sends
to one base URL at once: a request holds one of N slots while it is on the wire (not while it waits between
retries). Threads of one process first share an in-process semaphore (no busy waiting); processes share N
lock files per endpoint in the temporary folder, locked with `filelock` (maintained, portable OS locks that
the OS releases when a process dies, so a killed worker never keeps a slot).
"""
from __future__ import annotations

import hashlib
import random
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ...base.errors import ConfigError
from ...base.job_context import current_cancel_token

_POLL_S = 0.02  # between two rounds over the slot files when every slot is taken by another process
_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_registry_lock = threading.Lock()


def slot_dir(base_url: str) -> Path:
    """The folder of an endpoint's slot files (one per slot), in the machine's temporary folder."""
    digest = hashlib.sha256(base_url.encode("utf-8")).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "nemo-endpoint-slots" / digest


class EndpointLimiter:
    """`with limiter.slot(): send()` holds one of `limit` slots of `base_url` on this machine."""

    def __init__(self, base_url: str, limit: int, folder: Path | None = None) -> None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ConfigError(f"max_in_flight must be a whole number of at least 1, not {limit!r}.",
                              hint="It bounds the requests this machine sends to the endpoint at once.")
        self.base_url = base_url
        self.limit = limit
        self.folder = folder or slot_dir(base_url)
        self.folder.mkdir(parents=True, exist_ok=True)
        with _registry_lock:
            self._threads = _semaphores.setdefault((str(self.folder), limit), threading.BoundedSemaphore(limit))

    @contextmanager
    def slot(self) -> Iterator[int]:
        """Wait for a free slot (interruptible by the running job's cancel token); yields its number."""
        cancel = current_cancel_token()
        while not self._threads.acquire(timeout=0.1):
            if cancel is not None:
                cancel.raise_if_cancelled()
        try:
            lock, number = self._file_slot(cancel)
            try:
                yield number
            finally:
                lock.release()
        finally:
            self._threads.release()

    def _file_slot(self, cancel) -> tuple[FileLock, int]:
        order = list(range(self.limit))
        random.shuffle(order)  # processes starting together do not all try slot 0 first
        while True:
            for number in order:
                lock = FileLock(self.folder / f"slot-{number}.lock", thread_local=False)
                try:
                    lock.acquire(blocking=False)
                except Timeout:
                    continue
                return lock, number
            if cancel is not None:
                if cancel.wait(_POLL_S):
                    cancel.raise_if_cancelled()
            else:
                threading.Event().wait(_POLL_S)
