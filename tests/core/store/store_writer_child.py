"""Child process for the concurrency and crash tests (run as a script, not collected by pytest).

usage: store_writer_child.py DB_PATH PREFIX COUNT MODE [GO_FILE]
  MODE plain      small payload + one artifact shared by every writer (dedup under contention)
  MODE unique     payload + a unique 64 KiB bytes artifact
  MODE artifacts  payload + image, array and a 256 KiB bytes artifact, each unique per item
  MODE die-before-commit   put one result, then SIGKILL itself inside the transaction before COMMIT
  MODE die-before-rename   put one result, SIGKILL itself after the temp artifact file is written
Prints "PUT <i> <key>" after each committed put (flushed), so the parent knows what is durable.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from nemo_desktop.core.store import ResultsStore, result_key
from nemo_desktop.core.store import atomic as atomic_mod


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class DiesBeforeCommit(ResultsStore):
    """Test double: crashes after the row is inserted but before COMMIT."""

    @contextlib.contextmanager
    def transaction(self):
        with super().transaction() as conn:
            yield conn
            if conn.execute("SELECT count(*) FROM results WHERE key LIKE 'doomed%'").fetchone()[0]:
                die()


def unique_artifacts(prefix: str, i: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{prefix}/{i}".encode()).digest()[:8], "big"))
    image = Image.fromarray(rng.integers(0, 256, (48, 48, 3), dtype=np.uint8))
    array = rng.standard_normal((32, 16)).astype(np.float32)
    blob = rng.bytes(256 * 1024)
    expected = {"blob_sha256": hashlib.sha256(blob).hexdigest(), "array_sum": float(array.astype(np.float64).sum()),
                "image_pixels_sha256": hashlib.sha256(image.tobytes()).hexdigest()}
    return {"image": image, "array": array, "blob": blob}, expected


def main() -> None:
    db_path, prefix, count, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    go_file = Path(sys.argv[5]) if len(sys.argv) > 5 else None
    cls = DiesBeforeCommit if mode == "die-before-commit" else ResultsStore
    store = cls.open(db_path=db_path)
    print("READY", flush=True)
    if go_file is not None:
        while not go_file.exists():
            time.sleep(0.005)
    if mode == "die-before-rename":
        def replace_then_never(src, dst):
            die()
        atomic_mod.os.replace = replace_then_never  # (patches os.replace) the temp file is complete by now
    for i in range(count):
        key = result_key("test", writer=prefix, i=i)
        if mode == "plain":
            store.put(key, "test", {"writer": prefix, "i": i}, {"shared": b"same bytes in every result"})
        elif mode == "unique":
            blob = hashlib.sha256(f"{prefix}/{i}".encode()).digest() * 2048
            store.put(key, "test", {"i": i, "blob_sha256": hashlib.sha256(blob).hexdigest()}, {"blob": blob})
        elif mode == "artifacts":
            arts, expected = unique_artifacts(prefix, i)
            store.put(key, "crash", {"writer": prefix, "i": i, **expected}, arts)
        elif mode in ("die-before-commit", "die-before-rename"):
            key = f"doomed-{prefix}-{i}"
            store.put(key, "crash", {"i": i}, {"blob": os.urandom(4096)})
        else:
            raise SystemExit(f"unknown mode {mode}")
        print(f"PUT {i} {key}", flush=True)
    store.close()


if __name__ == "__main__":
    main()
