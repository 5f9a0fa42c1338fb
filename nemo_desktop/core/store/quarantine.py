"""The quarantine: artifact files that no healthy database accounts for are moved here, never deleted.

`ResultsStore.cleanup()` (and so `nemo cache check --repair`) moves the artifact files no result uses into a
dated folder `<store>/quarantine/<YYYYmmdd-HHMMSS>[-n]/`, keeping their paths relative to the artifacts folder.
An "orphan" is usually the leftover of an interrupted write, but it is also what every file of a database that
was emptied or lost looks like; a wrong guess must cost nothing. `nemo cache quarantine list|restore|purge`
shows the folders, moves their files back (after which `nemo cache salvage` can use them) or deletes them.

Only this module deletes quarantined files, and only when asked to (`purge`).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import ConfigError, StoreError

QUARANTINE_DIRNAME = "quarantine"
_FOLDER_RE = re.compile(r"^\d{8}-\d{6}(-\d+)?$")


@dataclass(frozen=True)
class QuarantineFolder:
    name: str
    path: Path
    files: int
    bytes: int

    def to_dict(self) -> dict:
        return {"name": self.name, "path": str(self.path), "files": self.files, "bytes": self.bytes}


def quarantine_root(store_dir: Path) -> Path:
    return Path(store_dir) / QUARANTINE_DIRNAME


def new_folder(store_dir: Path) -> Path:
    """Create and return a fresh dated folder (a new one per repair: nothing is mixed or overwritten)."""
    root = quarantine_root(store_dir)
    base = time.strftime("%Y%m%d-%H%M%S")
    n = 1
    while True:
        target = root / (base if n == 1 else f"{base}-{n}")
        try:
            target.mkdir(parents=True)
            return target
        except FileExistsError:
            n += 1
        except OSError as exc:
            raise StoreError(f"Could not create the quarantine folder {target}.",
                             hint="Check free disk space and the store folder's permissions; nothing was moved.",
                             detail=repr(exc)) from exc


def move_into(folder: Path, artifacts_dir: Path, path: Path) -> bool:
    """Move one artifact file into `folder`, under its path relative to `artifacts_dir`; False if it was gone."""
    rel = path.relative_to(artifacts_dir)
    dest = folder / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(path, dest)  # same file system (the usual case): a rename, nothing is copied
    except FileNotFoundError:
        return False
    except OSError:
        if not path.exists():
            return False
        try:  # another file system (a custom artifacts folder): copy, then remove
            shutil.copy2(path, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                dest.unlink()  # a partial copy; the original is untouched
            raise
        path.unlink()
    return True


def folders(store_dir: Path) -> list[QuarantineFolder]:
    """The quarantine folders, oldest first, with how many files and bytes each holds."""
    root = quarantine_root(store_dir)
    if not root.is_dir():
        return []
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and _FOLDER_RE.match(p.name)):
        files = [p for p in d.rglob("*") if p.is_file()]
        out.append(QuarantineFolder(d.name, d, len(files), sum(p.stat().st_size for p in files)))
    return out


def _select(store_dir: Path, name: str | None) -> list[QuarantineFolder]:
    found = folders(store_dir)
    if name is None:
        return found
    picked = [f for f in found if f.name == Path(name).name]
    if not picked:
        listed = ", ".join(f.name for f in found) or "none"
        raise ConfigError(f"There is no quarantine folder {name!r} (there are: {listed}).",
                          hint="`nemo cache quarantine list` shows them.")
    return picked


def restore(store_dir: Path, artifacts_dir: Path, name: str | None = None) -> dict[str, int]:
    """Move quarantined files back into the artifacts folder (all folders, or the one named). A file whose place
    is taken by identical bytes is dropped from the quarantine; one whose place holds different bytes stays in
    the quarantine ('kept'). Emptied folders are removed."""
    counts = {"restored": 0, "already_present": 0, "kept": 0}
    for folder in _select(store_dir, name):
        for src in sorted(p for p in folder.path.rglob("*") if p.is_file()):
            dest = artifacts_dir / src.relative_to(folder.path)
            if dest.exists():
                if dest.read_bytes() == src.read_bytes():
                    src.unlink()
                    counts["already_present"] += 1
                else:
                    counts["kept"] += 1
                continue
            move_back(src, dest)
            counts["restored"] += 1
        _remove_empty_dirs(folder.path)
    return counts


def move_back(src: Path, dest: Path) -> None:
    """Move a quarantined file back to its place `dest`: a rename, or a copy then remove when the artifacts
    folder is on another file system."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dest)
    except OSError:
        shutil.copy2(src, dest)
        src.unlink()


def purge(store_dir: Path, name: str | None = None) -> dict[str, int]:
    """Delete quarantined files for good (all folders, or the one named)."""
    counts = {"folders": 0, "files": 0, "bytes": 0}
    for folder in _select(store_dir, name):
        shutil.rmtree(folder.path)
        counts["folders"] += 1
        counts["files"] += folder.files
        counts["bytes"] += folder.bytes
    return counts


def _remove_empty_dirs(top: Path) -> None:
    for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()
    with contextlib.suppress(OSError):
        top.rmdir()
