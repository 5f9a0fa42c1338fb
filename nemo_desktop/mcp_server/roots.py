"""The confinement of tools' file access to the server's roots (the `--root` folders and the results store)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..core.base.confine import is_within, resolve
from .replies import ToolError


@dataclass
class Roots:
    """The folders tools may read and write: the user's `--root`s and the results store."""

    folders: list[Path] = field(default_factory=list)

    @classmethod
    def of(cls, folders: list[str | os.PathLike] | None, store_dir: Path | None = None) -> "Roots":
        out = [Path(f).expanduser().resolve() for f in folders or []]
        if store_dir is not None:
            out.append(Path(store_dir).resolve())
        return cls(out)

    def contains(self, path: Path) -> bool:
        """Whether the resolved `path` is a root or below one, by path components (never a string prefix)."""
        return any(is_within(path, r) for r in self.folders)

    def check(self, value: str | os.PathLike, what: str) -> Path:
        """The resolved path, or a ToolError when it is outside every root (links are followed first)."""
        try:
            resolved = resolve(value)
        except ValueError as exc:  # a NUL byte: no file has such a name
            raise ToolError(f"The {what} path {str(value)!r} cannot name a file: {exc}.",
                            hint="Give the path of a file or folder inside the server's roots.") from None
        except (OSError, RuntimeError) as exc:  # a link loop, a name too long
            raise ToolError(f"The {what} path {value} cannot be resolved ({exc}).") from None
        if not self.contains(resolved):
            allowed = ", ".join(str(r) for r in self.folders) or "none"
            raise ToolError(f"The {what} {value} is outside the folders this server may use ({allowed}).",
                            hint="Restart it with `nemo mcp --root FOLDER` to allow a folder.")
        return resolved

    def check_dataset(self, value: str | os.PathLike, what: str) -> str:
        """A dataset path checked like any path; a `fiftyone:NAME` source (core/data/sources.py) names no file, so
        its images are checked instead: every one must be inside a root (else a FiftyOne dataset would reach files
        the roots do not allow)."""
        from ..core.data.sources import is_fiftyone_ref, open_source

        if not is_fiftyone_ref(value):
            return str(self.check(value, what))
        outside = [p for p in open_source(str(value)).paths if not self.contains(resolve(p))]
        if outside:
            allowed = ", ".join(str(r) for r in self.folders) or "none"
            raise ToolError(f"{len(outside)} image(s) of the {what} {value} are outside the folders this server may "
                            f"use ({allowed}), e.g. {outside[0]}.",
                            hint="Restart it with `nemo mcp --root FOLDER` to allow the folder that holds them.")
        return str(value)

    def check_model_ref(self, ref: str, what: str) -> str:
        """A `<family>:<source>` reference may name a local folder or file: it must be inside a root too."""
        from ..core.models.catalog import list_catalog

        if ref in {e.id for e in list_catalog()}:
            return ref  # the catalog (shipped, or the user's own file) is trusted
        _family, _sep, source = ref.partition(":")
        if re.match(r"^[a-z][a-z0-9+.-]*://", source, re.I):  # an endpoint URL, not a file
            return ref
        for part in source.split(":"):
            looks_local = part.startswith(("/", "~", ".")) or (part and Path(part).exists())
            if looks_local:
                self.check(part, what)
        return ref


def _looks_like_path(value: str) -> bool:
    """A value that can name a file: separators, ~ or . first, or an existing file (relative to the server's
    working directory). A bare word that names nothing (a shipped sentence set: 'general') is a name."""
    return "/" in value or os.sep in value or value.startswith(("~", ".")) or "\0" in value or Path(value).exists()


def _checked_path(roots: "Roots", value: str, setting: str) -> str:
    """A file setting's value inside the roots (resolved), or a name left as it is."""
    if not _looks_like_path(value):
        return value
    return str(roots.check(value, f"file of setting '{setting}'"))
