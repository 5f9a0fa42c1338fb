"""The `--json OUT` option of the commands that also print a summary (explain, global, bench run)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(data: Any, out: str, **dumps_options: Any) -> None:
    """Indented JSON on stdout when OUT is '-' (the caller then prints no summary), else written atomically to
    the file OUT."""
    from ..core.store import atomic_write_text

    text = json.dumps(data, indent=2, **dumps_options)
    if out == "-":
        print(text)
    else:
        atomic_write_text(Path(out), text + "\n")
