"""The local Hugging Face cache, without network: where it is, which files a loader needs, status, usage, delete.

Everything follows huggingface_hub's standard cache layout (`models--org--name/blobs`, `snapshots/<commit>/`,
`refs/<branch>`), so weights are shared with the user's other tools. The cache is the user's default one
(HF_HOME / HF_HUB_CACHE) unless an explicit `cache_dir` is given or portable mode is on. Downloading into it
is `downloads.py`'s job; `select_files` is shared by both, so a complete snapshot means what a download fetches.
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable

from ..base.errors import ModelError, WeightsNotFoundError


# Weight formats a loader can read, in order of preference per folder; safetensors is safe to load.
_WEIGHT_EXTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
# Formats no loader here reads (other frameworks, exports) and media: never downloaded.
_SKIP_EXTS = (".h5", ".msgpack", ".onnx", ".onnx_data", ".tflite", ".ot", ".gguf", ".mlmodel", ".pb",
              ".png", ".jpg", ".jpeg", ".gif", ".webp", ".mp4", ".pdf", ".md", ".gitattributes")
# Kept when downloading, but a snapshot without them is still complete (other tools skip them).
_OPTIONAL_PREFIXES = ("license", "notice", "use_policy")
_SKIP_DIRS = ("onnx", "openvino", "coreml", "flax", "tf", "mlx", ".git")


# -- where the cache is ---------------------------------------------------------------------------------

def offline_mode() -> bool:
    """True when HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set; read at call time, not import time."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        value = os.environ.get(name)
        if value is not None and value.strip() != "":
            return value.strip().upper() in ("1", "ON", "YES", "TRUE")
    return False


def resolve_cache_dir(cache_dir: str | os.PathLike | None = None) -> str:
    """The hub cache folder in use: explicit > portable mode's folder > HF_HUB_CACHE / HF_HOME default."""
    if cache_dir:
        return str(Path(cache_dir).expanduser())
    from ..store.paths import get_paths

    portable = get_paths().hf_cache_dir()
    if portable:
        return portable
    if os.environ.get("HF_HUB_CACHE"):
        return str(Path(os.environ["HF_HUB_CACHE"]).expanduser())
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]).expanduser() / "hub")
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def repo_folder(repo_id: str, cache_dir: str | None = None) -> Path:
    return Path(resolve_cache_dir(cache_dir)) / ("models--" + repo_id.replace("/", "--"))


def _is_commit(revision: str | None) -> bool:
    return bool(revision) and len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)


def cached_commit(repo_id: str, revision: str | None = None, cache_dir: str | None = None) -> str | None:
    """The commit a branch/tag points to in the local cache (or the commit itself), without network."""
    if _is_commit(revision):
        return revision
    ref = repo_folder(repo_id, cache_dir) / "refs" / (revision or "main")
    try:
        return ref.read_text().strip() or None
    except OSError:
        return None


# -- which files a loader needs ------------------------------------------------------------------------

def select_files(paths: Iterable[str]) -> list[str]:
    """The files to download from a repository listing.

    Per folder, safetensors weights win over pickled ones (.bin/.pt/.pth/.ckpt), and non-variant files over
    variants (`x.fp16.safetensors`). In a diffusers repository (model_index.json at the root) the root-level
    weights are single-file duplicates of the component folders (FLUX.1-Kontext-dev: 24 GB) and are
    skipped. Other frameworks' formats, media and markdown docs are skipped; configs and tokenizer files
    are kept.
    """
    paths = sorted(set(paths))
    diffusers_repo = "model_index.json" in paths
    keep, weights_by_dir = [], {}
    for p in paths:
        pp = PurePosixPath(p)
        name = pp.name.lower()
        if any(part in _SKIP_DIRS for part in pp.parts[:-1]) or name.endswith(_SKIP_EXTS):
            continue
        if name.endswith(_WEIGHT_EXTS):
            if diffusers_repo and len(pp.parts) == 1:
                continue
            weights_by_dir.setdefault(str(pp.parent), []).append(p)
        else:
            keep.append(p)
    for files in weights_by_dir.values():
        for ext in _WEIGHT_EXTS:
            same = [f for f in files if f.lower().endswith(ext)]
            if same:
                plain = [f for f in same if not _is_variant(f)]
                keep.extend(plain or same)
                break
    return sorted(keep)


def _is_variant(path: str) -> bool:
    # diffusers variants: "diffusion_pytorch_model.fp16.safetensors", "model.fp16-00001-of-00002.safetensors"
    stem_parts = PurePosixPath(path).name.split(".")
    return len(stem_parts) > 2 and stem_parts[-2].split("-")[0] in ("fp16", "bf16", "fp32", "non_ema", "ema")


def _filter(paths: Iterable[str], allow_patterns: Iterable[str] | None) -> list[str]:
    """Files matching the catalog's allow patterns (when given), then without duplicates (select_files)."""
    if allow_patterns:
        patterns = list(allow_patterns)
        paths = [p for p in paths if any(fnmatch.fnmatch(p, pat) for pat in patterns)]
    return select_files(paths)


# -- status, usage, delete -------------------------------------------------------------------------------

@dataclass
class RepoStatus:
    repo_id: str
    state: str  # "downloaded" | "partial" | "absent"
    commit: str | None = None
    snapshot_path: str | None = None
    size_on_disk: int = 0
    missing: list[str] = field(default_factory=list)

    @property
    def downloaded(self) -> bool:
        return self.state == "downloaded"


def _folder_size(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for f in files:
            p = Path(root) / f
            if not p.is_symlink():
                try:
                    total += p.stat().st_size
                except OSError:
                    pass
    return total


def _missing_files(snapshot: Path, repo_id: str, commit: str, cache_dir: str,
                   allow_patterns: list[str] | None) -> list[str]:
    """Files a loader needs that the snapshot lacks (empty list = complete)."""
    try:  # exact answer when huggingface_hub cached the repository's file listing (snapshot_download does)
        from huggingface_hub import get_cached_repo_tree

        listing = [f.path for f in get_cached_repo_tree(repo_id, revision=commit, cache_dir=cache_dir)]
    except Exception:  # noqa: BLE001 - no listing cached (or an older huggingface_hub): check the structure
        listing = None
    if listing is not None:
        return [f for f in _filter(listing, allow_patterns) if not (snapshot / f).exists()
                and not PurePosixPath(f).name.lower().startswith(_OPTIONAL_PREFIXES)]
    return _structural_missing(snapshot)


def _structural_missing(snapshot: Path) -> list[str]:
    """Without a listing: every shard named by an index file and every diffusers component folder exists,
    and there is at least one config."""
    missing = []
    for index in snapshot.rglob("*.index.json"):
        try:
            shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
        except (OSError, ValueError):
            missing.append(str(index.relative_to(snapshot)))
            continue
        missing += [str((index.parent / s).relative_to(snapshot)) for s in sorted(shards)
                    if not (index.parent / s).exists()]
    model_index = snapshot / "model_index.json"
    if model_index.exists():
        try:
            components = json.loads(model_index.read_text())
        except ValueError:
            return ["model_index.json"]
        for name, value in components.items():
            if not name.startswith("_") and isinstance(value, list) and value and value[0] is not None:
                if not (snapshot / name).is_dir():
                    missing.append(name + "/")
    elif not any(snapshot.glob("*.json")):
        missing.append("config.json")
    return missing


def repo_status(repo_id: str, revision: str | None = None, cache_dir: str | None = None,
                allow_patterns: list[str] | None = None) -> RepoStatus:
    """Is this repository (at `revision`, default main) in the local cache, and complete? No network."""
    cache = resolve_cache_dir(cache_dir)
    folder = repo_folder(repo_id, cache)
    if not folder.is_dir():
        return RepoStatus(repo_id, "absent")
    size = _folder_size(folder / "blobs")
    commit = cached_commit(repo_id, revision, cache)
    if commit is None and revision is None:  # no ref (a copied cache): a single snapshot is unambiguous
        snapshots = [p for p in (folder / "snapshots").glob("*") if p.is_dir()]
        commit = snapshots[0].name if len(snapshots) == 1 else None
    snapshot = folder / "snapshots" / commit if commit else None
    if snapshot is None or not snapshot.is_dir():
        return RepoStatus(repo_id, "partial" if size else "absent", commit, None, size)
    missing = _missing_files(snapshot, repo_id, commit, cache, allow_patterns)
    return RepoStatus(repo_id, "partial" if missing else "downloaded", commit, str(snapshot), size, missing)


def is_local_source(repo: str) -> bool:
    """A catalog `repo` that names a folder on disk rather than a Hub repository."""
    return repo.startswith((".", "/", "~")) or Path(repo).expanduser().exists()


@dataclass(frozen=True)
class EntryStatus:
    """Where a catalog entry's weights stand, as `nemo models list` and the model manager show it."""
    status: str  # "downloaded" | "partial" | "not downloaded" (Hub) | "local" | "missing" (folder on disk)
    size_on_disk: int | None = None  # bytes in the cache; None for a folder on disk
    commit: str | None = None
    path: str | None = None  # the snapshot folder, or the folder on disk

    def to_dict(self) -> dict:
        return asdict(self)


def entry_status(entry, cache_dir: str | None = None) -> EntryStatus:
    """The status of a catalog entry's weights, from the local cache or disk only (no network)."""
    if is_local_source(entry.repo):
        folder = Path(entry.repo).expanduser()
        return EntryStatus("local" if folder.exists() else "missing", path=str(folder))
    st = repo_status(entry.repo, entry.revision, cache_dir, list(entry.allow_patterns or []) or None)
    status = {"downloaded": "downloaded", "partial": "partial"}.get(st.state, "not downloaded")
    return EntryStatus(status, st.size_on_disk, st.commit, st.snapshot_path)


def require_snapshot(repo_id: str, revision: str | None = None, cache_dir: str | None = None, *,
                     model_id: str | None = None) -> str:
    """The local snapshot folder of a complete download, or WeightsNotFoundError saying how to get it."""
    status = repo_status(repo_id, revision, cache_dir)
    if status.downloaded:
        return status.snapshot_path  # type: ignore[return-value]
    raise weights_not_found(repo_id, status, model_id=model_id)


def weights_not_found(repo_id: str, status: RepoStatus | None = None, *,
                      model_id: str | None = None) -> WeightsNotFoundError:
    what = "only partly in" if status is not None and status.state == "partial" else "not in"
    how = f"`nemo models download {model_id or repo_id}`"
    hint = f"Download it with {how} (or from the Model manager)."
    if offline_mode():
        hint = (f"Offline mode is on (HF_HUB_OFFLINE=1). On a machine with internet access, unset HF_HUB_OFFLINE and "
                f"run {how}, or copy its Hugging Face cache folder here.")
    detail = f"cache folder: {repo_folder(repo_id)}"
    if status is not None and status.missing:
        detail += "\nmissing: " + ", ".join(status.missing[:10])
    return WeightsNotFoundError(f"The weights of {repo_id} are {what} the local Hugging Face cache.",
                                hint=hint, detail=detail)


@dataclass(frozen=True)
class RepoUsage:
    repo_id: str
    repo_type: str
    size_on_disk: int
    nb_files: int
    revisions: tuple[str, ...]
    last_accessed: float
    path: str


def disk_usage(cache_dir: str | None = None) -> list[RepoUsage]:
    """Every repository in the cache with its size on disk, largest first (no network)."""
    from huggingface_hub import scan_cache_dir

    cache = Path(resolve_cache_dir(cache_dir))
    if not cache.is_dir():
        return []
    info = scan_cache_dir(cache)
    rows = [RepoUsage(r.repo_id, r.repo_type, r.size_on_disk, r.nb_files,
                      tuple(sorted(rev.commit_hash for rev in r.revisions)), r.last_accessed, str(r.repo_path))
            for r in info.repos]
    return sorted(rows, key=lambda r: r.size_on_disk, reverse=True)


def delete_repo(repo_id: str, cache_dir: str | None = None) -> int:
    """Delete every cached revision of a model repository (and its partial files); returns bytes freed.

    The repository's own folder is removed, which is what huggingface_hub's `delete_revisions` does when all
    revisions of a repo go; that API selects revisions by commit hash across *all* repos, so a hash shared
    with a duplicated repository would delete that one too.
    """
    import shutil

    cache = Path(resolve_cache_dir(cache_dir)).resolve()
    folder = repo_folder(repo_id, str(cache))
    if not folder.exists():
        return 0
    if folder.resolve().parent != cache:
        raise ModelError(f"Refusing to delete {folder}: it is not a repository folder of the cache {cache}.")
    freed = _folder_size(folder)
    shutil.rmtree(folder)
    return freed
