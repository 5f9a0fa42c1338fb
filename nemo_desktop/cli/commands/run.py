"""`nemo run ANALYSIS [DATA] [options]`: run any registered analysis (the built-in ones and every plugin's), with
its options derived from its registry entry: the data it runs on, the components it declares, one option per
setting of its config (label, type, choices and range from the field's info, as the app's form and the MCP tool
schema show them), --json / -o FILE for the result, progress on stderr, Ctrl-C cancels cleanly (exit 130).

The per-analysis commands (explain, fix, failure-modes, compare, competency, global) run the same entries with
options of their own on top; `nemo run --help` lists every registered analysis, `nemo run NAME --help` its options.
"""
from __future__ import annotations

import re


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run any registered analysis (plugins' too) with options from its entry",
                              description=__doc__.split("\n\n")[0], derive_options=_analyses)


def _analyses(p) -> None:
    """One sub-command per registered analysis, its options derived when it is used (parsed or its help shown):
    listing the registry imports the analyses' modules, which no other command pays for."""
    from ...core.registry import get_analysis, list_analyses
    from ..runner import add_analysis_arguments, run_registered

    sub = p.add_subparsers(dest="analysis", metavar="ANALYSIS", parser_class=type(p), required=True)
    for name in list_analyses():
        spec = get_analysis(name)
        first = re.split(r"(?<=[a-z0-9)])\. (?=[A-Z])", spec.description or name)[0].rstrip(".")
        q = sub.add_parser(name, help=f"[{spec.kind}] {first}", description=spec.description or None,
                           derive_options=lambda q, spec=spec: add_analysis_arguments(q, spec))
        q.set_defaults(func=run_registered)

