"""The `list_images` tool's listing: the image files of folders inside the roots, sorted, one page at a time.

An agent has no file system of its own: this is how it finds the paths the other tools take. A file whose
resolved path leaves the roots (a link to elsewhere) is refused and counted, never listed; links to folders are
not followed (a loop, or a tree outside the roots).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.base.confine import OUTSIDE, resolve
from ..core.base.images import is_image_file

MAX_PAGE = 1000
MAX_REFUSED_SHOWN = 20


def _walk(folder: Path, recursive: bool):
    if not recursive:
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if not entry.name.startswith(".") and not entry.is_dir(follow_symlinks=False):
                yield Path(entry.path)
        return
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield Path(here) / name


def list_images(folders: list[Path], roots: Any, *, recursive: bool = True, offset: int = 0,
                limit: int = 100) -> dict[str, Any]:
    """{"images": [path], "total", "offset", "next_offset" (None on the last page), "refused" (count),
    "refused_examples": [{"path", "reason"}]} over `folders` (each already checked to be inside `roots`)."""
    images: list[str] = []
    refused: list[dict[str, str]] = []
    for folder in folders:
        for path in _walk(folder, recursive):
            if not is_image_file(path):
                continue
            try:
                inside = roots.contains(resolve(path))
            except (OSError, ValueError, RuntimeError) as exc:
                refused.append({"path": str(path), "reason": f"its path cannot be resolved ({exc})"})
                continue
            if inside:
                images.append(str(path))
            else:
                refused.append({"path": str(path), "reason": OUTSIDE})
    page = images[offset:offset + limit]
    end = offset + len(page)
    return {"folders": [str(f) for f in folders], "images": page, "total": len(images), "offset": offset,
            "next_offset": end if end < len(images) else None, "refused": len(refused),
            "refused_examples": refused[:MAX_REFUSED_SHOWN]}
