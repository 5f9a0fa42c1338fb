"""`nemo`: the headless command line. Sub-commands live in `nemo_desktop/cli/commands/*.py`, each with a
`register(subparsers)` function; they are discovered here so adding a command touches one file.

Conventions shared by every command: `--json` prints the machine output on stdout (errors too, as
{"error": {...}}), `-o FILE` writes a command's output file, and the exit code follows `exit_codes`."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys

from .. import __version__
from ..core.errors import ConfigError, InputImageError, JobCancelled, NemoError
from . import exit_codes

log = logging.getLogger("nemo_desktop.cli")

EPILOG = ("exit codes: 0 success, 1 partial (some items failed; the others completed), 2 usage error (bad "
          "arguments, unknown model or method, a missing input file), 3 runtime error (nothing completed), "
          "130 interrupted (completed results are kept; a re-run resumes). With --json, errors are JSON on "
          "stdout too. Shell completion: `nemo completion bash|zsh|fish`.")


class _JsonUsageErrors:
    """argparse, except that a usage error under --json is JSON on stdout (exit 2 either way)."""

    def error(self, message: str):  # type: ignore[override]
        if _wants_json(sys.argv[1:] if _ARGV is None else _ARGV):
            _print_json_error({"type": "UsageError", "message": f"{self.prog}: {message}", "hint": None},
                              exit_codes.USAGE)
            self.exit(exit_codes.USAGE)
        super().error(message)  # type: ignore[misc]


class _Parser(_JsonUsageErrors, argparse.ArgumentParser):
    pass


_ARGV: list[str] | None = None  # the argv main() parses (tests pass one; the console script uses sys.argv)


def _wants_json(argv) -> bool:
    return "--json" in argv


def _print_json_error(err: dict, code: int) -> None:
    from .output import print_json_error

    print_json_error(err.pop("type"), err.pop("message"), err.pop("hint"), code, **err)


def build_parser() -> argparse.ArgumentParser:
    from . import commands

    parser = _Parser(
        prog="nemo", description="NEMO Desktop from the command line: explain why a vision classifier "
                                 "got an image wrong, and test each explanation.", epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"nemo-desktop {__version__}")
    parser.add_argument("--home", metavar="DIR", help="data root for this run (overrides NEMO_HOME)")
    parser.add_argument("--portable", action="store_true",
                        help="keep data and weights inside the checkout's models_cache/ folder")
    parser.add_argument("--portable-dir", metavar="DIR",
                        help="portable mode in DIR (for an installed copy, which has no checkout)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail to stderr")
    from .options import CommandParser

    class _CommandParser(_JsonUsageErrors, CommandParser):  # sub-commands (and theirs) report usage errors alike
        pass

    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{mod.name}").register(sub)
    return parser


def exit_code_for(exc: NemoError) -> int:
    """Usage errors (bad arguments or configuration, an input file that is not there or not an image) are 2;
    a cancelled job is 130; every other failure (a model, the store, a server) is a runtime error, 3."""
    if isinstance(exc, JobCancelled):
        return exit_codes.INTERRUPTED
    if isinstance(exc, (ConfigError, InputImageError)):
        return exit_codes.USAGE
    return exit_codes.RUNTIME


def main(argv: list[str] | None = None) -> int:
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(_ARGV)
    if args.home:
        os.environ["NEMO_HOME"] = args.home
    if args.portable_dir:
        os.environ["NEMO_PORTABLE"] = os.path.abspath(os.path.expanduser(args.portable_dir))
    elif args.portable:
        os.environ["NEMO_PORTABLE"] = "1"
    if not getattr(args, "func", None):
        parser.print_help()
        return exit_codes.SUCCESS
    as_json = bool(getattr(args, "json", False))
    from ..core.logging_setup import setup_logging
    from ..core.store.paths import get_paths

    try:
        setup_logging(get_paths(), stderr_level="DEBUG" if args.verbose else "WARNING")
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        if as_json:
            _print_json_error({"type": "KeyboardInterrupt", "message": "Interrupted.", "hint": None},
                              exit_codes.INTERRUPTED)
        print("\nInterrupted. Completed results are kept in the store; a re-run resumes.", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except NemoError as exc:
        log.debug("command failed", exc_info=True)
        code = exit_code_for(exc)
        err = exc.to_dict()  # redacted
        if as_json:
            _print_json_error({"type": type(exc).__name__, "message": err["message"], "hint": err["hint"]}
                              | ({"detail": err["detail"]} if args.verbose and err["detail"] else {}), code)
            return code
        print(f"error: {err['message']}", file=sys.stderr)
        if err["hint"]:
            print(f"hint: {err['hint']}", file=sys.stderr)
        if args.verbose and err["detail"]:
            print(err["detail"], file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
