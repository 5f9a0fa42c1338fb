"""What a drop of files and folders holds: the images to diagnose, and what was rejected and why.

Qt-free on purpose: it runs as a job on the I/O lane (a dropped folder may be large or on a slow disk),
so the GUI thread never waits on the file system. A folder contributes the images directly inside it and
those in its immediate sub-folders (a dataset laid out as one folder per class: `root/cat/x.jpg`), so the
true class can be read from the folder name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from nemo_desktop.core.base.job_context import JobContext


@dataclass
class DropScan:
    images: list[Path] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (what was dropped, why it was not used)


def scan_dropped(paths: Iterable[str | os.PathLike], ctx: JobContext) -> DropScan:
    from nemo_desktop.core.base.images import is_image_file, unreadable_reason

    scan = DropScan()

    def consider(path: Path) -> None:
        reason = unreadable_reason(path)  # a FIFO, an unreadable or dangling file: said now, not at decode time
        if reason is None:
            scan.images.append(path)
        else:
            scan.rejected.append((str(path), reason))

    for path in ctx.track([Path(p) for p in paths], stage="Checking dropped files"):
        if path.is_dir():
            try:
                entries = sorted(path.iterdir())
                children = [c for c in entries if is_image_file(c)]
                for sub in (e for e in entries if e.is_dir() and not e.name.startswith(".")):
                    ctx.check_cancelled()
                    try:
                        children += sorted(c for c in sub.iterdir() if is_image_file(c))
                    except OSError as exc:
                        scan.rejected.append((str(sub), f"the folder cannot be read ({exc.strerror or exc})"))
            except OSError as exc:
                scan.rejected.append((str(path), f"the folder cannot be read ({exc.strerror or exc})"))
                continue
            if children:
                for child in children:
                    consider(child)
            else:
                scan.rejected.append((str(path), "neither the folder nor its sub-folders hold image files"))
        elif is_image_file(path):  # a file, or named like one: a FIFO, a dangling link, an unreadable file
            consider(path)
        elif path.exists():
            scan.rejected.append((str(path), "not an image file NEMO Desktop can read"))
        else:
            scan.rejected.append((str(path), "it does not exist (any more)"))
    return scan


def describe_rejected(rejected: list[tuple[str, str]], limit: int = 10) -> str:
    lines = [f"• {Path(p).name or p}: {why}" for p, why in rejected[:limit]]
    if len(rejected) > limit:
        lines.append(f"… and {len(rejected) - limit} more")
    return "\n".join(lines)
