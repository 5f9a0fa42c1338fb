"""The output options every command shares: `--json` prints the machine output on stdout (instead of the human
summary), `-o FILE` writes it to a file (atomically). explain, global and bench run take both."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add_json_option(p, what: str = "the result") -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON on stdout instead of a summary")


def add_output_options(p, what: str = "the result") -> None:
    """--json (stdout) and -o FILE (a JSON file; the summary is still printed unless --json)."""
    add_json_option(p, what)
    p.add_argument("-o", "--output", metavar="FILE", help=f"also write {what} as JSON to FILE")


def json_text(data: Any, **dumps_options: Any) -> str:
    return json.dumps(data, indent=2, **dumps_options)


def write_json(data: Any, out: str | Path, **dumps_options: Any) -> None:
    """Indented JSON written atomically to the file `out` (a crash never leaves half a file)."""
    from ..core.store import atomic_write_text

    atomic_write_text(Path(out), json_text(data, **dumps_options) + "\n")


def emit(args, data: Any, summary: Callable[[], str], **dumps_options: Any) -> None:
    """What a command with --json / -o prints: the file first (so a failure to write is the error), then the
    JSON or the human summary on stdout."""
    if getattr(args, "output", None):
        write_json(data, args.output, **dumps_options)
    if args.json:
        print(json_text(data, **dumps_options))
        return
    print(summary())
    if getattr(args, "output", None):
        print(f"Full result written to {args.output}.")


def print_json_error(kind: str, message: str, hint: str | None, code: int, **extra: Any) -> None:
    """An error under --json: {"error": {type, message, hint, exit_code}} on stdout."""
    print(json_text({"error": {"type": kind, "message": message, "hint": hint, **extra, "exit_code": code}}))


def cancelled(args, message: str) -> int:
    """A job stopped by Ctrl-C: the message on stderr (and the error as JSON on stdout under --json); exit 130."""
    from .exit_codes import INTERRUPTED

    if getattr(args, "json", False):
        print_json_error("JobCancelled", message, None, INTERRUPTED)
    print(message, file=sys.stderr)
    return INTERRUPTED


def write_outputs(args, data: Any, **dumps_options: Any) -> None:
    """The JSON outputs of a command with --json / -o FILE whose summary is printed by the command itself:
    the file first (a failure to write is the error), then JSON on stdout under --json."""
    if getattr(args, "output", None):
        write_json(data, args.output, **dumps_options)
    if args.json:
        print(json_text(data, **dumps_options))
