"""The output options every command shares: `--json` prints the machine output on stdout (instead of the human
summary), `-o FILE` writes it to a file (atomically). explain, global and bench run take both.

Every option that names a file or folder a command writes has the type `OutputPath`: it is checked when the
command line is parsed, before any work (a missing or unwritable folder, a folder where a file is meant, is a
usage error, exit 2), and `-` is standard output where the output can go there (`-o -` is the same as --json)
and refused with a message everywhere else, never a file named `-`. A write that still fails later (a full
disk, a folder removed meanwhile) is a StoreError: exit 3 with one line, JSON under --json, no traceback.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.base.errors import ConfigError, InputImageError, JobCancelled, NemoError
from . import exit_codes

log = logging.getLogger("nemo_desktop.cli")

STDOUT = "-"


class Stdout(str):
    """The value of an output option given as `-`: standard output (`json`: the output is the command's JSON, so
    `-o -` is the same as --json)."""

    def __new__(cls, json_output: bool) -> "Stdout":
        obj = super().__new__(cls, STDOUT)
        obj.json_output = json_output
        return obj


class OutputPath:
    """argparse type of an option naming a file (`folder=False`) or a folder the command writes.

    stdout: None when `-` is refused (reports, CSV pairs, folders); "json" when `-` means the command's JSON on
    standard output (same as --json); "text" when it means the command's text output on standard output."""

    def __init__(self, *, folder: bool = False, stdout: str | None = None) -> None:
        self.folder = folder
        self.stdout = stdout
        self.__name__ = "folder" if folder else "file"  # argparse names the type in some messages

    def __call__(self, text: str) -> str:
        if text == STDOUT:
            if self.stdout is None:
                raise argparse.ArgumentTypeError(
                    f"'-' (standard output) is not possible here: give a {self.__name__} name.")
            return Stdout(self.stdout == "json")
        if not text.strip():
            raise argparse.ArgumentTypeError(f"give a {self.__name__} name.")
        p = Path(text).expanduser()
        if self.folder:
            if p.exists() and not p.is_dir():
                raise argparse.ArgumentTypeError(f"{text} is a file, not a folder.")
            ancestor = p
            while not ancestor.exists() and ancestor != ancestor.parent:
                ancestor = ancestor.parent
            if not ancestor.is_dir():
                raise argparse.ArgumentTypeError(f"{ancestor} is a file, so the folder {text} cannot be made.")
            if not os.access(ancestor, os.W_OK | os.X_OK):
                raise argparse.ArgumentTypeError(f"the folder {ancestor} is not writable.")
            return text
        if p.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a folder: give a file name.")
        parent = p.parent
        if not parent.is_dir():
            raise argparse.ArgumentTypeError(f"the folder {parent} does not exist (create it first, or choose "
                                             "another path).")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"the folder {parent} is not writable.")
        return text


def use_stdout_outputs(args: argparse.Namespace) -> None:
    """`-o -`: no file; a command whose -o is its JSON prints that JSON on stdout instead (as --json)."""
    for name, value in list(vars(args).items()):
        if isinstance(value, Stdout):
            setattr(args, name, None)
            if value.json_output:
                args.json = True


def add_json_option(p, what: str = "the result") -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON on stdout instead of a summary")


def add_output_options(p, what: str = "the result") -> None:
    """--json (stdout) and -o FILE (a JSON file; the summary is still printed unless --json)."""
    add_json_option(p, what)
    p.add_argument("-o", "--output", metavar="FILE", type=OutputPath(stdout="json"),
                   help=f"also write {what} as JSON to FILE ('-': on stdout instead, as --json)")


def json_text(data: Any, **dumps_options: Any) -> str:
    return json.dumps(data, indent=2, **dumps_options)


def write_file(out: str | Path, data: str | bytes) -> None:
    """Write a command's output file atomically; a failure (full disk, the folder gone) is a StoreError that
    names the file (exit 3), not a traceback."""
    from ..core.base.errors import StoreError
    from ..core.store import atomic_write_bytes, atomic_write_text

    path = Path(out).expanduser()
    try:
        if isinstance(data, bytes):
            atomic_write_bytes(path, data)
        else:
            atomic_write_text(path, data)
    except OSError as exc:
        raise StoreError(f"Cannot write {out}: {exc.strerror or exc}.",
                         hint="Check that its folder exists and is writable, and that the disk has space.",
                         detail=repr(exc)) from exc


def write_json(data: Any, out: str | Path, **dumps_options: Any) -> None:
    """Indented JSON written atomically to the file `out` (a crash never leaves half a file)."""
    write_file(out, json_text(data, **dumps_options) + "\n")


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


def cancelled(args, message: str, **extra: Any) -> int:
    """A job stopped by Ctrl-C: the message on stderr and, under --json, {"error": {"type": "JobCancelled",
    "message", "hint", ...extra, "exit_code": 130}} on stdout, the same for every command; returns 130."""
    exc = JobCancelled(message)
    exc.json_extra = extra  # type: ignore[attr-defined]
    return report_error(exc, args, bool(getattr(args, "json", False)))


def write_outputs(args, data: Any, **dumps_options: Any) -> None:
    """The JSON outputs of a command with --json / -o FILE whose summary is printed by the command itself:
    the file first (a failure to write is the error), then JSON on stdout under --json."""
    if getattr(args, "output", None):
        write_json(data, args.output, **dumps_options)
    if args.json:
        print(json_text(data, **dumps_options))


def add_delete_command(sub, name: str, helptext: str, target: tuple[str, str, str], func) -> Any:
    """A sub-command that deletes what its one argument names (`target`: dest, metavar, help), with --yes (do not
    ask, see `confirm_delete`) and --json."""
    p = sub.add_parser(name, help=helptext)
    p.add_argument(target[0], metavar=target[1], help=target[2])
    p.add_argument("--yes", action="store_true", help="do not ask")
    p.add_argument("--json", action="store_true", help="print what was deleted as JSON")
    p.set_defaults(func=func)
    return p


def confirm_delete(args, what: str, question: str | None = None) -> bool:
    """Whether to go on deleting `what`: --yes, or the user answers yes at the terminal (`question`, default
    "Delete {what}?"). With nobody to ask (stdin is not a terminal) and no --yes it is refused in words (exit 2),
    never taken as a yes."""
    import sys

    if getattr(args, "yes", False):
        return True
    if not sys.stdin.isatty():
        from ..core.base.errors import ConfigError

        raise ConfigError(f"Refusing to delete {what} without --yes (nobody to ask).",
                          hint="Add --yes to delete without asking.")
    return input(f"{question or f'Delete {what}?'} [y/N] ").strip().lower() in ("y", "yes")


def exit_code_for(exc: NemoError) -> int:
    """Usage errors (bad arguments or configuration, an input file that is not there or not an image) are 2;
    a cancelled job is 130; every other failure (a model, the store, a server) is a runtime error, 3. An error
    may carry its own `exit_code` (e.g. a batch command none of whose inputs could be read: 3, nothing
    completed)."""
    own = getattr(exc, "exit_code", None)
    if isinstance(own, int):
        return own
    if isinstance(exc, JobCancelled):
        return exit_codes.INTERRUPTED
    if isinstance(exc, (ConfigError, InputImageError)):
        return exit_codes.USAGE
    return exit_codes.RUNTIME


def report_error(exc: NemoError, args, as_json: bool) -> int:
    """An error (or a cancel) on stderr, or as {"error": ...} on stdout under --json; returns its exit code.
    Every command reports a cancel through here (output.cancelled), so a Ctrl-C gives one JSON shape."""
    log.debug("command failed", exc_info=True)
    code = exit_code_for(exc)
    err = exc.to_dict()  # redacted
    verbose = bool(getattr(args, "verbose", False))
    extra = dict(getattr(exc, "json_extra", None) or {})
    if as_json:
        shown = ({"type": type(exc).__name__, "message": err["message"], "hint": err["hint"]}
                 | ({"detail": err["detail"]} if verbose and err["detail"] else {}) | extra)
        print_json_error(shown.pop("type"), shown.pop("message"), shown.pop("hint"), code, **shown)
    if isinstance(exc, JobCancelled):  # the same words on stderr, with or without --json
        print(err["message"], file=sys.stderr)
        return code
    if as_json:
        return code
    print(f"error: {err['message']}", file=sys.stderr)
    if err["hint"]:
        print(f"hint: {err['hint']}", file=sys.stderr)
    if verbose and err["detail"]:
        print(err["detail"], file=sys.stderr)
    return code
