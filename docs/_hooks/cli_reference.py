"""The command-line reference, generated from `nemo`'s own argparse parser so that it cannot drift.

An MkDocs hook (mkdocs.yml: `hooks:`): at every build it walks the parser that `nemo` itself runs
(`nemo_desktop.cli.main.build_parser`), generically, every sub-command at every depth, and adds one page per
top-level command under `reference/cli/` plus an index, and lists those pages in the navigation. A command or an
option added to the parser (a new command module, an option derived from an analysis config, a plugin's
analysis) appears in the next build without touching the docs. `tests/test_docs.py` reads the same pages to check
that every `nemo ... --flag` the documentation names exists.

The walk reads argparse's `_actions` (argparse has no public walk; shtab, which generates the shell completion
from the same parser, reads the same fields). `format_help()` is called on each parser first: sub-commands whose
options are derived from an analysis config add them only then (`cli/options.py:CommandParser`).
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

FOLDER = "reference/cli"
NAV_TITLE = "Command line"  # the nav section (mkdocs.yml) whose pages this hook fills


@dataclass
class Option:
    flags: list[str]  # e.g. ["-o", "--out"]; a positional has its metavar here
    metavar: str
    help: str
    default: str | None
    choices: list[str] | None
    required: bool
    positional: bool


@dataclass
class Command:
    path: list[str]  # e.g. ["competency", "score"]
    help: str
    description: str
    usage: str
    options: list[Option] = field(default_factory=list)
    groups: dict[str, list[Option]] = field(default_factory=dict)  # argument-group title -> its options
    children: list["Command"] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join(["nemo", *self.path])


def _clean(text: str | None) -> str:
    return " ".join((text or "").split()).replace("%%", "%")


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    if action.option_strings:
        return action.dest.upper() if action.nargs != 0 else ""
    return action.dest


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if text == argparse.SUPPRESS:
        return ""
    params = {**vars(action), "prog": prog}
    if "%(" in text:
        try:
            text = text % {k: (v.__name__ if hasattr(v, "__name__") else v) for k, v in params.items()}
        except (KeyError, TypeError, ValueError):
            pass
    return _clean(text)


def _default(action: argparse.Action) -> str | None:
    d = action.default
    if d is None or d is argparse.SUPPRESS or action.nargs == 0 or isinstance(d, bool):
        return None
    if isinstance(d, (list, tuple)):
        return ",".join(map(str, d)) or None
    return str(d)


def _option(action: argparse.Action, prog: str) -> Option:
    positional = not action.option_strings
    return Option(flags=list(action.option_strings) or [_metavar(action)], metavar=_metavar(action),
                  help=_help(action, prog), default=_default(action),
                  choices=[str(c) for c in action.choices] if action.choices else None,
                  required=bool(getattr(action, "required", False)) and not positional, positional=positional)


def walk(parser: argparse.ArgumentParser, path: list[str] | None = None, help_text: str = "") -> Command:
    """The command tree of `parser`: every option of every sub-command, at every depth."""
    path = path or []
    parser.format_help()  # derives lazily added options first (cli/options.py)
    usage = _clean(parser.format_usage().removeprefix("usage:"))
    cmd = Command(path=path, help=_clean(help_text), description=_clean(parser.description), usage=usage)
    titles = {id(a): g.title for g in parser._action_groups for a in g._group_actions}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias of a sub-command already listed
                    continue
                seen.add(id(sub))
                cmd.children.append(walk(sub, [*path, name], helps.get(name, "")))
            continue
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        option = _option(action, parser.prog)
        cmd.options.append(option)
        title = titles.get(id(action)) or ("positional arguments" if option.positional else "options")
        cmd.groups.setdefault(title, []).append(option)
    return cmd


def _cell(text: str) -> str:
    """Table-cell text: pipes escaped; angle brackets as entities outside code spans (inside one they show)."""
    parts = re.split(r"(`[^`]*`)", text)
    parts = [p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts]
    return "".join(parts).replace("|", "\\|")


def _flag_cell(option: Option) -> str:
    flags = ", ".join(f"`{f}`" for f in option.flags)
    if option.metavar and not option.positional:
        flags += f" `{option.metavar}`"
    return flags.replace("|", "\\|")


def _section(cmd: Command, depth: int) -> list[str]:
    lines = [f"{'#' * depth} `{cmd.name}`", ""]
    if cmd.description or cmd.help:
        lines += [_clean(cmd.description or cmd.help), ""]
    lines += ["```text", f"usage: {cmd.usage}", "```", ""]
    for title, options in cmd.groups.items():
        lines += [f"**{title[:1].upper() + title[1:]}**", "", "| option | meaning | default |", "|---|---|---|"]
        for o in options:
            meaning = o.help or ""
            if o.choices:
                meaning += (" " if meaning else "") + "(choices: " + ", ".join(f"`{c}`" for c in o.choices) + ")"
            if o.required:
                meaning += " (required)"
            default = f"`{o.default}`" if o.default not in (None, "") else ""
            lines.append(f"| {_flag_cell(o)} | {_cell(meaning)} | {_cell(default)} |")
        lines.append("")
    if cmd.children:
        lines += ["| sub-command | what it does |", "|---|---|"]
        lines += [f"| [`{c.name}`](#{anchor(c)}) | {_cell(c.help)} |" for c in cmd.children]
        lines.append("")
        for child in cmd.children:
            lines += _section(child, depth + 1)
    return lines


def anchor(cmd: Command) -> str:
    """The heading id MkDocs' toc extension gives `## \\`nemo a b\\``."""
    return re.sub(r"[^\w\- ]", "", cmd.name).strip().lower().replace(" ", "-")


def page_name(cmd: Command) -> str:
    """`nemo-explain.md`: prefixed, so that a command named `index` cannot take the overview's `index.md`."""
    return f"nemo-{cmd.path[0]}.md"


def pages(parser: argparse.ArgumentParser | None = None) -> dict[str, str]:
    """{path under docs/: Markdown}: the index and one page per top-level command."""
    if parser is None:
        root = str(Path(__file__).resolve().parents[2])
        if root not in sys.path:  # this checkout's parser, not an installed copy's
            sys.path.insert(0, root)
        from nemo_desktop.cli.main import build_parser

        parser = build_parser()
    root = walk(parser)
    out: dict[str, str] = {}
    index = ["# Command-line reference", "",
             "Generated from `nemo`'s own parser at every documentation build, so every command and option below "
             "exists. The conventions every command shares (`--json`, `-o`, progress, exit codes, completion) are in "
             "the [command-line guide](../../guide/cli.md).", "",
             "```text", f"usage: {root.usage}", "```", ""]
    for title, options in root.groups.items():
        index += [f"**{title[:1].upper() + title[1:]}** (before the command, e.g. `nemo --home DIR doctor`)", "",
                  "| option | meaning |", "|---|---|"]
        index += [f"| {_flag_cell(o)} | {_cell(o.help)} |" for o in options]
        index.append("")
    index += ["| command | what it does |", "|---|---|"]
    for cmd in root.children:
        index.append(f"| [`{cmd.name}`]({page_name(cmd)}) | {_cell(cmd.help)} |")
        out[f"{FOLDER}/{page_name(cmd)}"] = "\n".join(_section(cmd, 1)) + "\n"
    if parser.epilog:
        index += ["", _clean(parser.epilog)]
    out[f"{FOLDER}/index.md"] = "\n".join(index) + "\n"
    return out


# MkDocs hooks -------------------------------------------------------------------------------------------------

_PAGES: dict[str, str] = {}


def on_config(config, **kwargs):
    """Fill the nav section NAV_TITLE with the index and one entry per command."""
    _PAGES.clear()
    _PAGES.update(pages())
    commands = sorted(p for p in _PAGES if not p.endswith("/index.md"))
    entries = [{"Overview": f"{FOLDER}/index.md"}] + [
        {p.rsplit("/", 1)[1].removesuffix(".md").replace("-", " ", 1): p} for p in commands]

    def fill(items):
        for item in items or []:
            if isinstance(item, dict):
                for title, value in item.items():
                    if title == NAV_TITLE:
                        item[title] = entries
                    elif isinstance(value, list):
                        fill(value)

    fill(config["nav"])
    return config


def on_files(files, config, **kwargs):
    from mkdocs.structure.files import File

    for path, text in _PAGES.items():
        files.append(File.generated(config, path, content=text))
    return files
