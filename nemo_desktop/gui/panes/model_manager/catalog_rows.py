"""The rows of the catalog table: each catalog entry with where its weights stand (Qt-free: runs as a job).

Status comes from the local Hugging Face cache only (no network): downloaded / partial / not downloaded,
or local / missing for entries that point to a folder on disk.
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
