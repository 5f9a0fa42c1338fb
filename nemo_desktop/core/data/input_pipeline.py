"""The input pipeline that keeps a classifier busy: decode, hash and preprocess batches on worker threads,
a few batches ahead of the model, in order, with errors per file and bounded memory.

PIL decodes and resizes outside the GIL, and hashing a file is I/O plus hashlib (which releases the GIL
too), so threads are enough; processes would have to pickle every decoded batch back. One task decodes one
whole batch: at most `ahead` batches are submitted and not yet consumed, plus the one being consumed, so the
decoded images alive at any moment are bounded by (ahead + 1) x batch size, whatever the dataset size.
Leaving the loop early (cancel, an error) cancels the batches not started and waits for the running ones,
so no worker outlives the loop.

Where the classifier has a `prepare_batch` (the CPU half of its preprocessing), workers run it too and the
batch travels as one host tensor (pinned on CUDA) instead of a list of images; without it (a user's own
classifier object) the decoded images travel and the classifier preprocesses them itself.

JPEG draft mode: a JPEG is decoded at a reduced DCT scale (1/2, 1/4, 1/8) when both sides stay at least
`draft_factor` x the classifier's input side, so the classifier's own resize still downsamples by that
factor with its antialiasing filter. Files that are not much larger than the input decode exactly as before.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..store.keys import content_hash

DEFAULT_DRAFT_FACTOR = 2.0


def default_workers() -> int:
    """Decode workers: the CPU count up to 8 (PIL decoding scales with cores; more only adds memory)."""
    return max(1, min(8, os.cpu_count() or 1))


@dataclass(frozen=True)
class LoaderSettings:
    """How images are fed to the model. Results do not depend on workers/ahead; draft_factor 0 decodes every
    JPEG in full (bit-identical to a plain decode), the default lets large JPEGs decode at reduced scale."""

    workers: int | None = None  # decode threads (None: default_workers())
    ahead: int | None = None  # batches decoded in advance (None: max(2, workers))
    draft_factor: float = DEFAULT_DRAFT_FACTOR
    decode: str = "cpu"  # "gpu": JPEGs decoded and resized on the classifier's CUDA device (gpu_decode.py)

    def __post_init__(self) -> None:
        from ..base.errors import ConfigError

        if self.workers is not None and self.workers < 1:
            raise ConfigError("The number of decode workers must be at least 1.", hint="Use e.g. --workers 4.")
        if self.ahead is not None and self.ahead < 1:
            raise ConfigError("At least one batch must be decoded ahead.")
        if self.draft_factor and self.draft_factor < 1:
            raise ConfigError("The JPEG draft factor must be 0 (off) or at least 1.")
        if self.decode not in ("cpu", "gpu"):
            raise ConfigError(f"Unknown decode path '{self.decode}'.", hint="Use cpu or gpu.")


@dataclass
class LoadedBatch:
    """One batch as the model consumes it: the items that decoded, in input order, and the ones that did not."""

    items: list[Any]  # the input items (any object; `path_of(item)` gives the file) that decoded
    sha256: list[str]  # content hash of each decoded item's file
    errors: list[tuple[Any, str]]  # (item, reason) of every unreadable file
    images: list[Any] | None = None  # decoded RGB images (no prepare function)
    pixels: Any = None  # prepare(images): a host tensor (with a prepare function)


@dataclass
class LoaderStats:
    """Counters for tests and benchmarks: how many decoded batches were alive at once, at most."""

    live: int = 0
    peak_live: int = 0
    batches: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def enter(self) -> None:
        with self._lock:
            self.live += 1
            self.peak_live = max(self.peak_live, self.live)

    def leave(self) -> None:
        with self._lock:
            self.live -= 1
            self.batches += 1


def draft_side_for(classifier: Any, draft_factor: float) -> int | None:
    """The side a JPEG may be draft-decoded down to for this classifier (None: always decode in full)."""
    side = getattr(classifier, "input_side", None)
    if not draft_factor or not side:
        return None
    return int(round(float(side) * float(draft_factor)))


class BatchLoader:
    """Iterate over `items` in batches of `batch_size`, decoded `ahead` batches in advance by `workers` threads.

    `path_of(item)` is the file to read; `prepare(images)` (optional) turns the decoded images into the
    batch's host tensor on the worker. Iterating is a generator: closing it (`contextlib.closing`, or the end of
    a for loop left by break or an exception) cancels the batches not started and waits for the running ones.
    """

    def __init__(self, items: Sequence[Any], batch_size: int, *, path_of: Callable[[Any], Path] = lambda it: it,
                 prepare: Callable[[list[Any]], Any] | None = None, workers: int | None = None,
                 ahead: int | None = None, draft_side: int | None = None,
                 read: Callable[[Path], Any] | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.items = items
        self.batch_size = int(batch_size)
        self.path_of = path_of
        self.prepare = prepare
        self.workers = max(1, int(workers or default_workers()))
        self.ahead = max(1, int(ahead if ahead is not None else max(2, self.workers)))
        self.draft_side = draft_side
        self.read = read  # instead of decoding with PIL (gpu_decode.read_for_device: a JPEG's bytes)
        self.stats = LoaderStats()

    def __iter__(self) -> Iterator[LoadedBatch]:
        n = len(self.items)
        starts = iter(range(0, n, self.batch_size))
        pending: deque[Future] = deque()
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="nemo-decode")
        try:
            for start in starts:
                pending.append(pool.submit(self._load, self.items[start:start + self.batch_size]))
                if len(pending) > self.ahead:
                    yield from self._take(pending)
            while pending:
                yield from self._take(pending)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for f in pending:  # finished but never consumed (the loop was left early): no longer alive
                if not f.cancelled() and f.exception() is None:
                    self.stats.leave()

    def _take(self, pending: deque) -> Iterator[LoadedBatch]:
        batch = pending.popleft().result()
        try:
            yield batch
        finally:
            self.stats.leave()

    def _load(self, batch: Sequence[Any]) -> LoadedBatch:
        """Decode and hash each file (errors per file), then prepare the batch; runs on a worker."""
        from ..base.images import load_image

        self.stats.enter()
        try:
            items, shas, images, errors = [], [], [], []
            for item in batch:
                path = self.path_of(item)
                try:
                    # decode first: it refuses a FIFO, which hashing would wait on forever
                    image = self.read(path) if self.read else load_image(path, draft_side=self.draft_side)
                    sha = content_hash(path)
                except Exception as exc:  # noqa: BLE001 - any decoding failure is this file's problem, not the run's
                    errors.append((item, getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"))
                    continue
                items.append(item)
                shas.append(sha)
                images.append(image)
            if self.prepare is not None and images:
                return LoadedBatch(items, shas, errors, pixels=self.prepare(images))
            return LoadedBatch(items, shas, errors, images=images)
        except BaseException:
            self.stats.leave()
            raise
