"""The catalog table's rows and the model manager's file actions (Qt-free: each runs as a job).

Status comes from the local Hugging Face cache only (no network): downloaded / partial / not downloaded,
or local / missing for entries that point to files on disk. "downloading n%" and "loaded" are live states
the pane lays over these. The status itself is core's `entry_status`, the one `nemo models list` shows.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nemo_desktop.core.base.job_context import JobContext

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


def catalog_row(entry, cache_dir: str) -> CatalogRow:
    from nemo_desktop.core.models.downloads import entry_status

    st = entry_status(entry, cache_dir)
    return CatalogRow(entry, st.status, st.size_on_disk or None)


def load_catalog(ctx: JobContext) -> CatalogSnapshot:
    from nemo_desktop.core.models.catalog import list_catalog
    from nemo_desktop.core.models.downloads import resolve_cache_dir

    ctx.progress("Reading the model catalog", 0, None)
    cache = resolve_cache_dir()
    entries = sorted(list_catalog(), key=lambda e: (KIND_ORDER.get(e.kind, 9), e.id))
    rows = [catalog_row(e, cache) for e in ctx.track(entries, stage="Checking the weights cache")]
    return CatalogSnapshot(rows, cache)


def refresh_row(entry, ctx: JobContext) -> CatalogRow:
    from nemo_desktop.core.models.downloads import resolve_cache_dir

    return catalog_row(entry, resolve_cache_dir())


# -- actions (jobs on the I/O lane) ----------------------------------------------------------------------

def hub_token(token_ref: str | None) -> str | None:
    """The token the settings point to (env: or keyring:), passed to the download as an argument.

    None for no reference and for the default env:HF_TOKEN: huggingface_hub then finds the token itself
    (HF_TOKEN, or `hf auth login`), and an unset HF_TOKEN still allows public models. resolve_secret
    registers the value for redaction; it is never put into this process's environment.
    """
    from nemo_desktop.core.base.secret_refs import resolve_secret

    if not token_ref or token_ref.strip() == "env:HF_TOKEN":
        return None
    return resolve_secret(token_ref)


def download_entry(entry, token_ref: str | None, ctx: JobContext) -> str:
    from nemo_desktop.core.base.errors import ConfigError
    from nemo_desktop.core.models.downloads import download_repo, is_local_source

    if is_local_source(entry.repo):
        raise ConfigError(f"{entry.id} points to files on this computer ({entry.repo}); there is nothing to "
                          "download.")
    return download_repo(entry.repo, ctx=ctx, revision=entry.revision or None,
                         allow_patterns=list(entry.allow_patterns) if entry.allow_patterns else None,
                         gated=entry.gated, model_id=entry.id, token=hub_token(token_ref))


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
