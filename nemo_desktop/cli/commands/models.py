"""`nemo models list|download|rm|du`: the model catalog and the weights in the Hugging Face cache.

    nemo models list [--kind editor] [--json]   catalog ids with download status, size, VRAM, license
    nemo models download flux-kontext-dev       progress bar; Ctrl-C stops, a re-run resumes
    nemo models rm flux-kontext-dev             delete its cached weights
    nemo models du [--json]                     disk usage of every repository in the cache

ID is a catalog id; `download`, `rm` also take a Hub repository id (org/name) that is not in the catalog.
"""
from __future__ import annotations

import json
import sys

from ..output import add_delete_command, confirm_delete
from ..progress import StageBars


def register(subparsers) -> None:
    p = subparsers.add_parser("models", help="model catalog and weights: list, download, rm, du",
                              description=__doc__.split("\n\n")[0])
    ms = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    ls = ms.add_parser("list", help="catalog entries with download status")
    ls.add_argument("--kind", choices=("classifier", "mllm", "editor", "generator"), help="only this kind of model")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(func=run_list)
    dl = ms.add_parser("download", help="download a model's weights into the Hugging Face cache")
    dl.add_argument("id", metavar="ID", help="catalog id (or Hub repository id org/name)")
    dl.add_argument("--revision", help="branch, tag or commit (default: the catalog's)")
    dl.add_argument("--workers", type=int, default=4, metavar="N", help="files downloaded at once (default 4)")
    dl.add_argument("--json", action="store_true", help="print the downloaded folder as JSON")
    dl.set_defaults(func=run_download)
    add_delete_command(ms, "rm", "delete a model's weights from the Hugging Face cache",
                       ("id", "ID", "catalog id (or Hub repository id org/name)"), run_rm)
    du = ms.add_parser("du", help="disk usage of the Hugging Face cache, per repository")
    du.add_argument("--json", action="store_true", help="print JSON instead of a table")
    du.set_defaults(func=run_du)


def _target(ref: str):
    """(catalog entry or None, repo id) for an id or a Hub repository id."""
    from ...core.base.errors import ConfigError
    from ...core.models.catalog import get_entry

    try:
        entry = get_entry(ref)
        return entry, entry.repo
    except ConfigError:
        if ref.count("/") == 1 and not ref.startswith((".", "/", "~")):
            return None, ref
        raise


def run_list(args) -> int:
    from ...core.models.catalog import format_size, list_catalog
    from ...core.models.downloads import entry_status, resolve_cache_dir

    cache = resolve_cache_dir()
    rows = [(e, entry_status(e, cache)) for e in sorted(list_catalog(args.kind), key=lambda e: (e.kind, e.id))]
    families = family_rows(args.kind)
    problems = report_plugin_problems()
    if args.json:
        print(json.dumps({"cache_dir": cache,
                          "models": [{**e.to_dict(), **st.to_dict(), "license_url": e.license_url}
                                     for e, st in rows],
                          "families": families, "plugin_errors": [p.to_dict() for p in problems]},
                         indent=2))
        return 0
    header = ("ID", "KIND", "STATUS", "SIZE", "VRAM bf16", "LICENSE", "GATED")
    table = [header] + [(e.id + (" *" if e.paper_default else ""), e.kind, st.status,
                         format_size(e.disk_size_bytes), f"{e.vram_bf16_gb:g} GB", e.license,
                         "yes" if e.gated else "no") for e, st in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"\n* the paper's default. Weights cache: {cache}")
    by_kind: dict[str, list[str]] = {}
    for f in families:
        by_kind.setdefault(f["kind"], []).append(f["family"] + (f" (plugin {f['plugin']})" if f["plugin"] else ""))
    print("Families (any model as <family>:<source>): " + "; ".join(
        f"{kind}: {', '.join(names)}" for kind, names in by_kind.items()))
    return 0


def family_rows(kind: str | None = None) -> list[dict]:
    """The registered model families, each with the plugin distribution it came from (None: built in)."""
    from ...core.models.families import list_families
    from ...core.base.plugins import FAMILIES_GROUP, plugin_of

    out = []
    for k, name in list_families(kind):
        plugin = plugin_of(FAMILIES_GROUP, f"{k}:{name}")
        out.append({"kind": k, "family": name, "plugin": (plugin.dist or plugin.name) if plugin else None})
    return out


def report_plugin_problems() -> list:
    """Warn on stderr about each plugin that was skipped (by name, with why); returns them."""
    from ...core.models.families import list_families
    from ...core.base.plugins import plugin_problems
    from ...core.registry import list_analyses

    list_families(), list_analyses()  # each registry loads its plugins on first use
    problems = plugin_problems()
    for p in problems:
        print(f"warning: skipped {p.describe()}: {p.error}", file=sys.stderr)
    return problems


def run_download(args) -> int:
    from ...core.base.errors import ConfigError
    from ...core.base.job_context import JobContext
    from ...core.models.catalog import format_size
    from ...core.models.downloads import download_repo, is_local_source

    entry, repo = _target(args.id)
    if is_local_source(repo):
        raise ConfigError(f"'{args.id}' points to a local folder ({repo}); there is nothing to download.")
    bar = _DownloadBar(entry.id if entry else repo)
    ctx = JobContext(on_progress=bar)
    try:
        path = download_repo(repo, ctx=ctx, revision=args.revision or (entry.revision if entry else None),
                             allow_patterns=list(entry.allow_patterns) if entry and entry.allow_patterns else None,
                             gated=entry.gated if entry else None, max_workers=args.workers,
                             model_id=entry.id if entry else repo)
    except KeyboardInterrupt:
        bar.close()
        done = ctx.last_progress.done if ctx.last_progress else 0
        from ..output import cancelled

        print(file=sys.stderr)  # below the bar
        return cancelled(args, f"Download stopped after {format_size(done)}. Finished files are kept: run the same "
                               "command to resume.")
    finally:
        bar.close()
    if args.json:
        print(json.dumps({"model": entry.id if entry else repo, "repo": repo, "path": str(path)}, indent=2))
    else:
        print(f"{entry.id if entry else repo}: downloaded to {path}")
    return 0


class _DownloadBar(StageBars):
    """One bar in bytes for the download (its one stage), named after the model; none while files are listed."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def __call__(self, p) -> None:
        if p.total is not None:
            super().__call__(p)

    def _open(self, p):
        from tqdm import tqdm

        return tqdm(total=p.total, initial=p.done, unit="B", unit_scale=True, unit_divisor=1024, desc=self.name,
                    file=sys.stderr, dynamic_ncols=True)


def run_rm(args) -> int:
    from ...core.base.errors import ConfigError
    from ...core.models.catalog import format_size
    from ...core.models.downloads import delete_repo, is_local_source, repo_folder

    entry, repo = _target(args.id)
    if is_local_source(repo):
        raise ConfigError(f"'{args.id}' points to a local folder ({repo}); NEMO Desktop does not delete it.",
                          hint="Delete the folder yourself if you no longer need it.")
    if not repo_folder(repo).exists():
        print(json.dumps({"repo": repo, "deleted": False, "freed_bytes": 0}) if args.json else
              f"{repo} is not in the cache; nothing to delete.")
        return 0
    if not confirm_delete(args, f"the cached weights of {repo}"):
        return 1
    freed = delete_repo(repo)
    print(json.dumps({"repo": repo, "deleted": True, "freed_bytes": freed}) if args.json else
          f"deleted {repo} ({format_size(freed)} freed)")
    return 0


def run_du(args) -> int:
    from ...core.models.catalog import format_size, list_catalog
    from ...core.models.downloads import disk_usage, resolve_cache_dir

    cache = resolve_cache_dir()
    ids_by_repo: dict[str, list[str]] = {}
    for e in list_catalog():
        ids_by_repo.setdefault(e.repo, []).append(e.id)
    rows = disk_usage(cache)
    total = sum(r.size_on_disk for r in rows)
    if args.json:
        print(json.dumps({"cache_dir": cache, "total_bytes": total,
                          "repos": [{"repo_id": r.repo_id, "repo_type": r.repo_type, "size_on_disk": r.size_on_disk,
                                     "nb_files": r.nb_files, "revisions": list(r.revisions),
                                     "catalog_ids": ids_by_repo.get(r.repo_id, []), "path": r.path}
                                    for r in rows]}, indent=2))
        return 0
    for r in rows:
        ids = ", ".join(ids_by_repo.get(r.repo_id, [])) or "-"
        print(f"{format_size(r.size_on_disk):>10}  {r.repo_type:<7}  {r.repo_id}  ({ids})")
    print(f"{format_size(total):>10}  total in {cache}")
    return 0
