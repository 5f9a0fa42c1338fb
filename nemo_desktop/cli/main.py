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
from ..core.base.errors import ConfigError, JobCancelled, NemoError, StoreError
from . import exit_codes
from .output import report_error

log = logging.getLogger("nemo_desktop.cli")

EPILOG = ("exit codes: 0 success, 1 partial (some items failed; the others completed), 2 usage error (bad "
          "arguments, unknown model or method, a missing input file, an output folder that does not exist), "
          "3 runtime error (nothing completed), 130 interrupted (completed results are kept; a re-run resumes), "
          "141 stdout closed by its reader (`| head`). With --json, errors and a cancel are JSON on stdout too. "
          "'-' as an output file is stdout (-o -: as --json) or refused. Shell completion: `nemo completion "
          "bash|zsh|fish`.")


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


def check_path_options(args) -> None:
    """--home, NEMO_HOME and portable mode name the data root; NEMO_HOME (or --home) wins over NEMO_PORTABLE.
    Asking for portable mode on the command line while a home is set would be silently ignored: refused."""
    home = args.home or os.environ.get("NEMO_HOME")
    asked = "--portable-dir" if args.portable_dir else "--portable" if args.portable else None
    if home and asked:
        where = "--home" if args.home else "NEMO_HOME"
        other = "drop --home" if args.home else "unset NEMO_HOME"
        raise ConfigError(f"{asked} cannot be combined with {where} ({home}): the data root would be {home} and "
                          f"{asked} ignored.", hint=f"Drop {asked}, or {other} to use portable mode.")


def main(argv: list[str] | None = None) -> int:
    """The command line; a closed stdout (`nemo ... | head`) ends it quietly, as Unix tools do."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # inside the try: a reader gone meanwhile is a broken pipe here, not at exit
        return code
    except BrokenPipeError:
        _silence_stdout()
        return exit_codes.BROKEN_PIPE


def _silence_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test's captured stdout)
        pass


def _main(argv: list[str] | None) -> int:
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(_ARGV)
    from .output import use_stdout_outputs

    use_stdout_outputs(args)
    as_json = bool(getattr(args, "json", False))
    try:
        check_path_options(args)
    except ConfigError as exc:
        return report_error(exc, args, as_json)
    if args.home:
        os.environ["NEMO_HOME"] = args.home
    if args.portable_dir:
        os.environ["NEMO_PORTABLE"] = os.path.abspath(os.path.expanduser(args.portable_dir))
    elif args.portable:
        os.environ["NEMO_PORTABLE"] = "1"
    if not getattr(args, "func", None):
        parser.print_help()
        return exit_codes.SUCCESS
    from ..core.app.logging_setup import setup_logging
    from ..core.store.paths import get_paths, use_portable_caches

    try:
        paths = get_paths()
        use_portable_caches(paths)  # portable mode: the torch hub cache in the portable folder too
        try:
            setup_logging(paths, stderr_level="DEBUG" if args.verbose else "WARNING")
        except StoreError as exc:  # read-only media: commands that only read still work (a write says so itself)
            print(f"warning: {exc.message} The log goes to the terminal only.", file=sys.stderr)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside a cancellable job (e.g. a model loading)
        interrupted = JobCancelled("Interrupted. Completed results are kept in the store; a re-run resumes.")
        return report_error(interrupted, args, as_json)
    except NemoError as exc:
        return report_error(exc, args, as_json)
    except BrokenPipeError:
        raise
    except OSError as exc:  # a file the command writes or reads failed in a way no command foresaw
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        error = StoreError(f"{exc.strerror or exc}{where}.", hint="Check the path, its permissions and free space.",
                           detail=repr(exc))
        return report_error(error, args, as_json)


if __name__ == "__main__":
    sys.exit(main())
