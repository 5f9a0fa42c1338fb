"""`nemo cache info|check|clear`: inspect, verify and empty the results store."""
from __future__ import annotations

import json
import sys


def _open_store():
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths

    store = ResultsStore.open(get_paths().ensure())
    if store.recovered_from:
        print(f"warning: the results database was corrupt; it was moved aside to {store.recovered_from} "
              "and a new one was created.", file=sys.stderr)
    return store


def run_info(args) -> int:
    store = _open_store()
    info = store.info()
    store.close()
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        for k, v in info.items():
            print(f"{k}: {v}")
    return 0


def run_check(args) -> int:
    store = _open_store()
    problems = store.check()
    if problems and args.repair:
        removed = store.cleanup()
        print(f"removed {removed['tmp']} leftover temporary file(s) and {removed['orphans']} orphan artifact file(s)")
        problems = store.check()
    store.close()
    if args.json:
        print(json.dumps({"ok": not problems, "problems": problems}, indent=2))
    elif problems:
        print(f"{len(problems)} problem(s) found:")
        for p in problems:
            print(f"  - {p}")
        print("Affected results will be recomputed on their next use; `nemo cache check --repair` removes "
              "leftover temporary and orphan files.")
    else:
        print("results store OK")
    return 1 if problems else 0


def run_clear(args) -> int:
    if not args.yes:
        what = f"all results of kind '{args.kind}'" if args.kind else "ALL stored results"
        if not sys.stdin.isatty():
            from ...core.errors import ConfigError

            raise ConfigError(f"Refusing to delete {what} without --yes (nobody to ask).",
                              hint="Add --yes to delete without asking.")
        if input(f"Delete {what}? [y/N] ").strip().lower() not in ("y", "yes"):
            return 1
    store = _open_store()
    n = store.clear(args.kind)
    store.close()
    print(json.dumps({"deleted": n, "kind": args.kind}) if args.json else f"deleted {n} result(s)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("cache", help="results store: info, integrity check, clear")
    cs = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    i = cs.add_parser("info", help="sizes and counts")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=run_info)
    c = cs.add_parser("check", help="verify database integrity and artifact files")
    c.add_argument("--json", action="store_true")
    c.add_argument("--repair", action="store_true", help="remove leftover temporary and orphan artifact files")
    c.set_defaults(func=run_check)
    d = cs.add_parser("clear", help="delete stored results")
    d.add_argument("--kind", help="only results of this kind (e.g. caption, explanation)")
    d.add_argument("--yes", action="store_true", help="do not ask")
    d.add_argument("--json", action="store_true", help="print the number deleted as JSON")
    d.set_defaults(func=run_clear)
