"""Command-line options derived from an analysis' config dataclass (core/registry/params.py): a new config
field becomes an option with its label, help and range, without touching the command."""
from __future__ import annotations

import argparse
from typing import Any, Iterable

from ..core.registry.params import ParamInfo, config_params, parse_value

PREFIX = "opt_"  # argparse dest of a derived option: opt_<field name>


class CommandParser(argparse.ArgumentParser):
    """A sub-command's parser whose derived options are added only when that command is used (parsed or its help
    shown): building `nemo`'s parser then imports no analysis module, so every other command starts as fast."""

    def __init__(self, *args: Any, derive_options: Any = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._derive_options = derive_options

    def _derive(self) -> None:
        derive, self._derive_options = self._derive_options, None
        if derive is not None:
            derive(self)

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001 - argparse's own signature
        self._derive()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._derive()
        return super().format_help()


def _help(p: ParamInfo) -> str:
    parts = [(p.help or p.label).rstrip(".")]  # the parts are joined with "; "
    if p.multi:
        parts.append(f"some of {', '.join(p.choices or ())}, comma-separated or the option repeated")
    elif p.choices:
        parts.append(f"one of {', '.join(p.choices)}")
    if p.minimum is not None or p.maximum is not None:
        lo = "" if p.minimum is None else f">= {p.minimum}"
        hi = "" if p.maximum is None else f"<= {p.maximum}"
        parts.append(" and ".join(x for x in (lo, hi) if x))
    if "default" in (p.help or ""):
        return "; ".join(parts)
    default = p.default
    if isinstance(default, tuple):
        default = ",".join(map(str, default)) or "none"
    parts.append(f"default: {'not set' if default is None else default}")
    return "; ".join(parts)


def _metavar(p: ParamInfo) -> str:
    if p.multi:  # several names from a list (e.g. generators), not files
        return "NAME[,NAME]"
    return {"int": "N", "float": "X", "bool": "true|false", "size": "WxH", "paths": "FILE[,FILE]"}.get(
        p.kind or "", "TEXT")


def add_config_options(parser: argparse.ArgumentParser | Any, config_classes: Iterable[type | None], *,
                       skip: Iterable[str] = ()) -> list[ParamInfo]:
    """Add one option per editable field of the configs (the union, each field once); returns the params.
    Options are absent from the namespace unless given, so the analysis' own defaults apply."""
    skip = set(skip)
    seen: dict[str, ParamInfo] = {}
    for cls in config_classes:
        for p in config_params(cls):
            if p.kind is None or p.name in skip or p.name in seen:
                continue
            seen[p.name] = p
    group = parser.add_argument_group("analysis settings") if hasattr(parser, "add_argument_group") else parser
    for p in seen.values():
        group.add_argument(p.cli_flag, dest=PREFIX + p.name, metavar=_metavar(p), default=argparse.SUPPRESS,
                           type=_parser_for(p), help=_help(p).replace("%", "%%"),  # argparse %-formats help
                           **({"action": _ExtendNames} if p.kind == "paths" else {}))
    return list(seen.values())


class _ExtendNames(argparse.Action):
    """A tuple option given twice adds to the first (--methods a --methods b == --methods a,b), where argparse's
    default would silently keep only the last."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001 - argparse's signature
        before = getattr(namespace, self.dest, None) or ()
        setattr(namespace, self.dest, None if values is None else tuple(dict.fromkeys((*before, *values))))


def _parser_for(p: ParamInfo):
    def parse(text: str) -> Any:
        from ..core.base.errors import ConfigError

        try:
            return parse_value(p, text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    parse.__name__ = p.kind or "value"
    return parse


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The derived options the user gave, by field name."""
    return {k[len(PREFIX):]: v for k, v in vars(args).items() if k.startswith(PREFIX)}


def analysis_options(*names: str, skip: Iterable[str] = ()):
    """A command's `derive_options`: one option per setting of the named analyses' configs (their registry
    entries), added when the command is used."""
    skip = tuple(skip)

    def derive(parser: argparse.ArgumentParser) -> None:
        from ..core.registry import get_analysis

        add_config_options(parser, [get_analysis(n).config for n in names], skip=skip)

    return derive


def derive_all(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add every derived option of `parser` and of its sub-commands, recursively (what `nemo run`'s sub-commands and
    the analyses' settings add when used): the completion script and the CLI reference walk the whole tree."""
    if isinstance(parser, CommandParser):
        parser._derive()
    for action in parser._actions:  # argparse has no public walk of its sub-commands
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # an alias maps to the same parser
                derive_all(sub)
    return parser
