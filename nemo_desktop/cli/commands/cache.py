"""`nemo cache info|check|clear|salvage|discard|quarantine`: inspect, verify and empty the results store, recover the
results of a damaged database that was moved aside, and list, restore or purge the quarantined artifact files
(`check --repair` moves artifact files no result uses there; it never deletes them)."""
from __future__ import annotations

import json
import sys

from ..output import add_delete_command, confirm_delete


def _open_store():
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths

    store = ResultsStore.open(get_paths().ensure())
    if store.recovered_from:
        print(f"warning: the results database was damaged (unreadable, or truncated to 0 bytes beside stored "
              f"files); it was moved aside to {store.recovered_from} and a new one was created. Its artifact "
              f"files are kept. `nemo cache salvage {store.recovered_from}` recovers its readable results.",
              file=sys.stderr)
    if store.opened_empty:
        print(f"warning: the results database {store.db_path} was an empty file (0 bytes) with no stored files "
              "beside it; a new store was created in it.", file=sys.stderr)
    return store


def _writable(folder) -> bool:
    """Whether the store's folder can be written (False on read-only media: access() reports EROFS)."""
    import os

    return not folder.is_dir() or os.access(folder, os.W_OK)


def run_info(args) -> int:
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths

    paths = get_paths()
    if _writable(paths.database.parent):
        store = _open_store()
    else:  # read-only media: inspected as it is, nothing created or changed
        store = ResultsStore.open_read_only(paths.database, paths.artifacts_dir)
        print(f"note: {paths.database.parent} cannot be written (read-only media or permissions): the store is "
              f"opened read-only ({store.read_only}); nothing is changed.", file=sys.stderr)
    info = store.info() | {"read_only": store.read_only}
    store.close()
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        for k, v in info.items():
            print(f"{k}: {v}")
    return 0


def run_check(args) -> int:
    from ...core.base.errors import JobCancelled
    from ...core.store.maintenance import PROBLEM_DATABASE
    from ..output import cancelled
    from ..progress import StageBars, cancellable_job

    store = _open_store()
    try:
        # Hashing every artifact file takes seconds to minutes on a large store: a bar, and Ctrl-C stops it.
        with cancellable_job(StageBars(terminal_only=True), cancels_after="the current file") as ctx:
            problems = store.check(ctx)
    except JobCancelled:
        store.close()
        return cancelled(args, "Cancelled; nothing was changed.")
    removed = repaired = None
    if args.repair and any(p.startswith(PROBLEM_DATABASE) for p in problems):
        from ...core.store.salvage import move_aside_and_salvage

        try:
            with cancellable_job(StageBars(terminal_only=True)) as ctx:
                store, aside, report = move_aside_and_salvage(store, ctx)
        except JobCancelled:
            return cancelled(args, "Cancelled while salvaging; the damaged database is kept aside: `nemo cache "
                                   "salvage FILE` (listed by `nemo cache check`) finishes the job.")
        repaired = {"moved_aside": str(aside), "salvage": report.to_dict()}
        if not args.json:
            print(f"The results database was damaged: it was moved aside to {aside} and a fresh one was created.")
            print(format_salvage(report))
    if problems and args.repair:
        removed = store.cleanup()
        if not args.json:  # stdout under --json holds the JSON only
            where = ""
            if removed["orphans"]:
                folders = store.quarantine_folders()
                where = f" to {folders[-1].path}" if folders else ""
            print(f"removed {removed['tmp']} leftover temporary file(s); moved {removed['orphans']} orphan "
                  f"artifact file(s) to the quarantine{where} (`nemo cache quarantine list|restore|purge`)")
        problems = store.check()
    store.close()
    if args.json:
        print(json.dumps({"ok": not problems, "problems": problems}
                         | ({"removed": removed} if removed is not None else {})
                         | ({"repaired": repaired} if repaired is not None else {}), indent=2))
    elif problems:
        print(f"{len(problems)} problem(s) found:")
        for p in problems:
            print(f"  - {p}")
        print("Affected results will be recomputed on their next use; `nemo cache check --repair` removes "
              "leftover temporary files and moves orphan artifact files to the quarantine (never deletes them); a "
              "damaged database it moves aside and salvages.")
    else:
        print("results store OK")
    return 1 if problems else 0


def run_salvage(args) -> int:
    from pathlib import Path

    from ...core.base.errors import JobCancelled
    from ...core.store.salvage import salvage_into
    from ..output import cancelled
    from ..progress import StageBars, cancellable_job

    store = _open_store()
    try:
        with cancellable_job(StageBars(terminal_only=True)) as ctx:
            report = salvage_into(store, Path(args.file), ctx)
    except JobCancelled:
        return cancelled(args, "Cancelled; no result was salvaged (run the same command to start over).")
    finally:
        store.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    print(format_salvage(report))
    return 0


def format_salvage(report) -> str:
    """Every loss the report knows, in words (the same counts as its --json)."""
    lost = report.results_missing_files + report.results_unreadable_refs
    lines = [f"Salvaged from {report.source}: {report.results} result(s) recovered, {report.results_existing} "
             f"already in the store, {lost} not recovered; {report.runs} run(s) with {report.run_items} item(s)."]
    losses = ((report.results_missing_files, "result(s) not recovered because their artifact files are gone."),
              (report.results_unreadable_refs, "result(s) not recovered because the list of their artifact files "
                                               "was on a damaged page."),
              (report.damaged_regions, "damaged region(s) of the database could not be read: the results, runs and "
                                       "run items stored there are lost, and how many cannot be told."))
    lines += [f"  {count} {words}" for count, words in losses if count]
    if report.files_from_quarantine:
        lines.append(f"{report.files_from_quarantine} artifact file(s) of recovered results were moved back from "
                     "the quarantine.")
    lines += [f"note: {note}" for note in report.notes]
    lines.append(f"When you no longer need it: `nemo cache discard {report.source}`.")
    return "\n".join(lines)


def run_discard(args) -> int:
    from pathlib import Path

    from ...core.store.salvage import discard

    if not confirm_delete(args, str(args.file), f"Delete the damaged database {args.file}? Its results can then "
                                                "no longer be salvaged."):
        return 1
    store = _open_store()
    try:
        discard(store.db_path, Path(args.file))
    finally:
        store.close()
    if args.json:
        print(json.dumps({"deleted": args.file}))
        return 0
    print(f"deleted {args.file}; `nemo cache check --repair` now moves the artifact files no result uses to the "
          "quarantine")
    return 0


def run_quarantine(args) -> int:
    action = args.quarantine_action
    if action == "purge":
        what = f"the quarantine folder {args.name}" if args.name else "ALL quarantined files"
        if not confirm_delete(args, what, f"Delete {what} for good?"):
            return 1
    store = _open_store()
    try:
        if action == "list":
            found = store.quarantine_folders()
            if args.json:
                print(json.dumps([f.to_dict() for f in found], indent=2))
            elif not found:
                print("the quarantine is empty")
            else:
                for f in found:
                    print(f"{f.name}: {f.files} file(s), {f.bytes} bytes ({f.path})")
            return 0
        if action == "restore":
            counts = store.restore_quarantine(args.name)
            if args.json:
                print(json.dumps(counts))
            else:
                print(f"restored {counts['restored']} file(s) to {store.artifacts_dir}; {counts['already_present']} "
                      f"were already there; {counts['kept']} left in the quarantine because a different file has "
                      "their place")
            return 0
        counts = store.purge_quarantine(args.name)
    finally:
        store.close()
    if args.json:
        print(json.dumps(counts))
    else:
        print(f"deleted {counts['files']} quarantined file(s) ({counts['bytes']} bytes) in {counts['folders']} "
              "folder(s)")
    return 0


def run_clear(args) -> int:
    if not confirm_delete(args, f"all results of kind '{args.kind}'" if args.kind else "ALL stored results"):
        return 1
    store = _open_store()
    n = store.clear(args.kind)
    store.close()
    print(json.dumps({"deleted": n, "kind": args.kind}) if args.json else f"deleted {n} result(s)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("cache", help="results store: info, integrity check, clear, salvage, quarantine")
    cs = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    i = cs.add_parser("info", help="sizes and counts")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=run_info)
    c = cs.add_parser("check", help="verify database integrity and artifact files")
    c.add_argument("--json", action="store_true")
    c.add_argument("--repair", action="store_true",
                   help="remove leftover temporary files; move orphan artifact files to the quarantine; a "
                        "damaged database: move it aside to <database>.corrupt-<YYYYmmdd-HHMMSS> and salvage its "
                        "readable results into a fresh one (the file is kept until `nemo cache discard`)")
    c.set_defaults(func=run_check)
    s = cs.add_parser("salvage", help="recover the readable results of a damaged database moved aside")
    s.add_argument("file", metavar="FILE", help="the moved-aside database (<database>.corrupt-<time>)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=run_salvage)
    add_delete_command(cs, "discard", "delete a damaged database moved aside (its files become removable)",
                       ("file", "FILE", "the moved-aside database (<database>.corrupt-<time>)"), run_discard)
    q = cs.add_parser("quarantine", help="artifact files moved aside by --repair: list, restore, purge")
    qs = q.add_subparsers(dest="quarantine_action", metavar="ACTION", required=True)
    ql = qs.add_parser("list", help="the quarantine folders, with file counts and sizes")
    ql.add_argument("--json", action="store_true")
    qr = qs.add_parser("restore", help="move quarantined files back into the store (then `salvage` can use them)")
    qr.add_argument("name", nargs="?", metavar="FOLDER", help="one folder (as listed); all when left out")
    qr.add_argument("--json", action="store_true")
    qp = qs.add_parser("purge", help="delete quarantined files for good")
    qp.add_argument("name", nargs="?", metavar="FOLDER", help="one folder (as listed); all when left out")
    qp.add_argument("--yes", action="store_true", help="do not ask")
    qp.add_argument("--json", action="store_true")
    q.set_defaults(func=run_quarantine)
    d = cs.add_parser("clear", help="delete stored results")
    d.add_argument("--kind", help="only results of this kind (e.g. caption, explanation)")
    d.add_argument("--yes", action="store_true", help="do not ask")
    d.add_argument("--json", action="store_true", help="print the number deleted as JSON")
    d.set_defaults(func=run_clear)
