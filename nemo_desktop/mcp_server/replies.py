"""What a client reads back: tool errors and tool results as MCP content, every text through the secret redactor."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULT_URI = "nemo://result/"
MAX_TEXT = 200_000  # characters of JSON in one tool result (a run-sized result is truncated, see get_result)


class ToolError(Exception):
    """A tool's failure as the client reads it (message and hint, already redacted)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


@dataclass
class ToolOutput:
    data: Any
    images: list[tuple[str, Path]] = field(default_factory=list)  # (label, png/jpeg file)


def _error_text(exc: BaseException) -> str:
    from ..core.base.errors import NemoError
    from ..core.base.secrets import redact

    if isinstance(exc, ToolError):
        message, hint = exc.message, exc.hint
    elif isinstance(exc, NemoError):
        d = exc.to_dict()
        message, hint = d["message"], d["hint"]
    else:
        message, hint = f"Internal error ({type(exc).__name__}): {exc}", "See the server's log for details."
    return redact(f"error: {message}" + (f"\nhint: {hint}" if hint else ""))


def _content(output: ToolOutput) -> list[Any]:
    import mcp.types as types

    from ..core.base.secrets import redact

    text = redact(json.dumps(output.data, indent=1, ensure_ascii=False, default=str))
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + "\n... (truncated; read the whole result as its resource)"
    out: list[Any] = [types.TextContent(type="text", text=text)]
    for label, path in output.images:
        mime = "image/jpeg" if path.suffix.lower() in (".jpg", ".jpeg") else "image/png"
        try:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError:
            continue
        out.append(types.TextContent(type="text", text=f"image: {label}"))
        out.append(types.ImageContent(type="image", data=data, mime_type=mime))
    return out


def _is_nemo_error(exc: BaseException) -> bool:
    from ..core.base.errors import NemoError

    return isinstance(exc, NemoError)
