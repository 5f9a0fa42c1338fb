"""`nemo`: the headless command line. Sub-commands live in `nemo_desktop/cli/commands/*.py`, each with a
`register(subparsers)` function; they are discovered here so adding a command touches one file."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys

from .. import __version__
from ..core.errors import NemoError

log = logging.getLogger("nemo_desktop.cli")


def build_parser() -> argparse.ArgumentParser:
    from . import commands

    parser = argparse.ArgumentParser(
        prog="nemo", description="NEMO Desktop from the command line: explain why a vision classifier "
                                 "got an image wrong, and test each explanation.")
    parser.add_argument("--version", action="version", version=f"nemo-desktop {__version__}")
    parser.add_argument("--home", metavar="DIR", help="data root for this run (overrides NEMO_HOME)")
    parser.add_argument("--portable", action="store_true",
                        help="keep data and weights inside the checkout's models_cache/ folder")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail to stderr")
    from .options import CommandParser

    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{mod.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.home:
        os.environ["NEMO_HOME"] = args.home
    if args.portable:
        os.environ["NEMO_PORTABLE"] = "1"
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from ..core.logging_setup import setup_logging
    from ..core.store.paths import get_paths

    try:
        setup_logging(get_paths(), stderr_level="DEBUG" if args.verbose else "WARNING")
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("\nInterrupted. Completed results are kept in the store; a re-run resumes.", file=sys.stderr)
        return 130
    except NemoError as exc:
        log.debug("command failed", exc_info=True)
        err = exc.to_dict()  # redacted
        print(f"error: {err['message']}", file=sys.stderr)
        if err["hint"]:
            print(f"hint: {err['hint']}", file=sys.stderr)
        if args.verbose and err["detail"]:
            print(err["detail"], file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
