"""Checks every adapter family makes of a ModelSpec before loading: no unknown option, a local folder that
holds the model's marker file."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from ...base.errors import ConfigError

LOCAL_DIR = "local-dir:"


def check_options(given: Iterable[str], known: Sequence[str], what: str) -> None:
    """Refuse option names that `what` (e.g. "an OpenAI-compatible endpoint") does not know; a typo must not be
    silently ignored."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(f"Unknown option(s) for {what}: {', '.join(unknown)}.",
                          hint=f"Known options: {', '.join(known)}.")


def local_folder(source: str, marker: str, what: str, hint: str) -> Path:
    """The folder of a `local-dir:<folder>` source, refused unless it holds `marker` (e.g. config.json)."""
    folder = Path(source[len(LOCAL_DIR):]).expanduser()
    if not (folder / marker).is_file():
        raise ConfigError(f"{folder} is not {what} (no {marker}).", hint=hint)
    return folder
