"""Atomic file writes: a reader sees the old file or the complete new one, never a partial one.

The data goes to a temporary file in the destination's own directory (so that `os.replace` is a rename
within one file system), is fsynced, renamed over the destination, and the directory is fsynced so that
the rename itself survives a power cut. A crash leaves at most a `*.tmp` file behind, which
`ResultsStore.check()` reports and `ResultsStore.cleanup()` removes.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from pathlib import Path
from typing import BinaryIO, Iterator

TMP_SUFFIX = ".tmp"
_TMP_PID_RE = re.compile(r"\.(\d+)-[0-9a-f]+\.tmp$")


def corrupt_aside_name(path: Path) -> Path:
    """A free name next to `path` for moving an unreadable file aside: `<name>.corrupt-<time>[-n]`."""
    base = f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}"
    target, n = path.with_name(base), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{base}-{n}")
    return target


def temp_name_for(path: Path) -> Path:
    """A unique hidden sibling `.name.<pid>-<random>.tmp`: concurrent writers never share one, and the pid
    tells a cleanup whether the writer may still be running (see `temp_writer_alive`)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(6)}{TMP_SUFFIX}")


def temp_writer_alive(tmp: Path) -> bool:
    """Whether the process that named this temp file may still be writing it (False: a crash leftover)."""
    m = _TMP_PID_RE.search(tmp.name)
    if m is None:
        return False
    pid = int(m.group(1))
    if pid == os.getpid():
        return True
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process on Windows; be conservative
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: exists, owned by someone else
        return True
    return True


def fsync_dir(directory: Path) -> None:
    """Persist a rename; a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Yield a binary file; on a clean exit it replaces `path` atomically, on an exception it is removed."""
    path = Path(path)
    tmp = temp_name_for(path)
    f = open(tmp, "xb")
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_writer(path) as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    atomic_write_bytes(path, text.encode(encoding))
