"""The catalog table's rows and the model manager's file actions (Qt-free: each runs as a job).

Status comes from the local Hugging Face cache only (no network): downloaded / partial / not downloaded,
or local / missing for entries that point to files on disk. "downloading n%" and "loaded" are live states
the pane lays over these. `entry_status` mirrors `nemo models list` (cli/commands/models.py); core offers
no per-entry status function yet, so the rule lives here for the GUI.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nemo_desktop.core.jobs import JobContext

KIND_ORDER = {"classifier": 0, "mllm": 1, "editor": 2}


@dataclass(frozen=True)
class CatalogRow:
    entry: object  # nemo_desktop.core.models.catalog.CatalogEntry
    status: str
    size_on_disk: int | None = None


@dataclass(frozen=True)
class CatalogSnapshot:
    rows: list[CatalogRow]
    cache_dir: str


def _is_local(repo: str) -> bool:
    return repo.startswith((".", "/", "~")) or Path(repo).expanduser().exists()


def entry_status(entry, cache_dir: str) -> CatalogRow:
    from nemo_desktop.core.models.downloads import repo_status

    if _is_local(entry.repo):
        return CatalogRow(entry, "local" if Path(entry.repo).expanduser().exists() else "missing")
    st = repo_status(entry.repo, entry.revision, cache_dir, list(entry.allow_patterns or []) or None)
    status = {"downloaded": "downloaded", "partial": "partial"}.get(st.state, "not downloaded")
    return CatalogRow(entry, status, st.size_on_disk or None)


def load_catalog(ctx: JobContext) -> CatalogSnapshot:
    from nemo_desktop.core.models.catalog import list_catalog
    from nemo_desktop.core.models.downloads import resolve_cache_dir

    ctx.progress("Reading the model catalog", 0, None)
    cache = resolve_cache_dir()
    entries = sorted(list_catalog(), key=lambda e: (KIND_ORDER.get(e.kind, 9), e.id))
    rows = [entry_status(e, cache) for e in ctx.track(entries, stage="Checking the weights cache")]
    return CatalogSnapshot(rows, cache)


def refresh_row(entry, ctx: JobContext) -> CatalogRow:
    from nemo_desktop.core.models.downloads import resolve_cache_dir

    return entry_status(entry, resolve_cache_dir())


# -- actions (jobs on the I/O lane) ----------------------------------------------------------------------

def use_hub_token(token_ref: str | None) -> None:
    """Make the token the settings point to visible to huggingface_hub (which reads HF_TOKEN).

    Only when HF_TOKEN itself is not set: an explicit environment always wins. The value stays in this
    process (never written anywhere) and is registered for redaction by core.secrets.
    """
    import os

    from nemo_desktop.core.secrets import resolve_secret

    if not token_ref or token_ref == "env:HF_TOKEN" or os.environ.get("HF_TOKEN"):
        return
    value = resolve_secret(token_ref)
    if value:
        os.environ["HF_TOKEN"] = value


def download_entry(entry, token_ref: str | None, ctx: JobContext) -> str:
    from nemo_desktop.core.errors import ConfigError
    from nemo_desktop.core.models.downloads import download_repo

    if _is_local(entry.repo):
        raise ConfigError(f"{entry.id} points to files on this computer ({entry.repo}); there is nothing to "
                          "download.")
    use_hub_token(token_ref)
    return download_repo(entry.repo, ctx=ctx, revision=entry.revision or None,
                         allow_patterns=list(entry.allow_patterns) if entry.allow_patterns else None,
                         gated=entry.gated, model_id=entry.id)


def delete_entry_weights(entry, ctx: JobContext) -> int:
    from nemo_desktop.core.models.downloads import delete_repo

    ctx.progress(f"Deleting the weights of {entry.id}", 0, None)
    return delete_repo(entry.repo)


@dataclass(frozen=True)
class DiskReport:
    cache_dir: str
    repos: list  # nemo_desktop.core.models.downloads.RepoUsage
    catalog_ids: dict  # repo id -> [catalog ids]
    free_bytes: int | None


def disk_report(ctx: JobContext) -> DiskReport:
    import shutil

    from nemo_desktop.core.models.catalog import list_catalog
    from nemo_desktop.core.models.downloads import disk_usage, resolve_cache_dir

    ctx.progress("Measuring the weights cache", 0, None)
    cache = resolve_cache_dir()
    ids: dict[str, list[str]] = {}
    for e in list_catalog():
        ids.setdefault(e.repo, []).append(e.id)
    probe = Path(cache)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        free = None
    return DiskReport(cache, disk_usage(cache), ids, free)
