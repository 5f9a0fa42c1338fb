"""Which files this process may read or write while a server confines it (`nemo mcp --root`), per file.

A tool's arguments are checked against the roots where they arrive (mcp_server/roots.py), but a dataset folder,
a CSV manifest, a reference folder or an estimator folder inside a root can still point outside it: a symlinked
member, an absolute path in a CSV row, a link inside a saved folder. While `confined(roots)` is active, every
place that opens such a file (`images.open_image_file`, the content hash of a file, an estimator's files, a
report's images) asks `outside_reason(path)` after resolving it, and refuses that one file with the reason; the
rest of a batch goes on (a dataset's unreadable file is that file's error, never the whole run's).

Containment is by path components after resolving links (`Path.is_relative_to` on resolved paths), never by
string prefix: `/data-evil/x.png` is not inside the root `/data`. Outside a server nothing is confined.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from nemo_desktop.core.base.errors import NemoError

_lock = threading.Lock()
_active: list[tuple[Path, ...]] = []  # a stack: a process-wide setting (a job's own threads read files too)

OUTSIDE = "it leads outside the folders this server may use"
OUTSIDE_HINT = "Restart the server with `nemo mcp --root FOLDER` to allow the folder that holds it."


class OutsideRootsError(NemoError):
    """A file a tool would read or write resolves outside the server's roots."""


def is_within(path: Path, root: Path) -> bool:
    """Whether `path` is `root` or below it, by path components (both already resolved)."""
    return path == root or path.is_relative_to(root)


def resolve(path: str | os.PathLike) -> Path:
    """`path` absolute with every link followed; ValueError for a path no file can have (a NUL byte)."""
    text = os.fspath(path)
    if "\0" in str(text):
        raise ValueError("a path cannot contain a NUL byte (\\0)")
    return Path(text).expanduser().absolute().resolve()


@contextmanager
def confined(roots: Sequence[str | os.PathLike]) -> Iterator[None]:
    """Confine file access to `roots` (resolved) for the block, in every thread of this process."""
    entry = tuple(Path(r).expanduser().resolve() for r in roots)
    with _lock:
        _active.append(entry)
    try:
        yield
    finally:
        with _lock:
            for i in range(len(_active) - 1, -1, -1):
                if _active[i] is entry:
                    del _active[i]
                    break


def current_roots() -> tuple[Path, ...] | None:
    with _lock:
        return _active[-1] if _active else None


def outside_reason(path: str | os.PathLike) -> str | None:
    """Why `path` may not be used now (it, or a link on its way, leads outside the roots), or None."""
    roots = current_roots()
    if roots is None:
        return None
    try:
        resolved = resolve(path)
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a link loop
        return f"its path cannot be used ({exc})"
    if any(is_within(resolved, r) for r in roots):
        return None
    return OUTSIDE


def check_file(path: str | os.PathLike, what: str = "file") -> Path:
    """`path` as given when it may be used now, else OutsideRootsError naming it and why."""
    reason = outside_reason(path)
    if reason is not None:
        raise OutsideRootsError(f"The {what} {os.fspath(path)!s} is not used: {reason}.", hint=OUTSIDE_HINT)
    return Path(path)
