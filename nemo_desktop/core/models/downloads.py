"""Download weights from the Hugging Face Hub into the local cache with progress and cancel; Hub errors in words.

A download lists the repository once (`model_info(files_metadata=True)`: commit and file sizes), keeps only
the files a loader needs (`select_files`: safetensors over pickles, no single-file duplicates in diffusers
repos), and fetches them one `hf_hub_download` per file on a few threads, with a tqdm-compatible class that
turns byte updates into `JobContext.progress(stage, done, total, rate=...)` and raises `JobCancelled` from
inside a running transfer. Resuming: files already in the cache are skipped, so an interrupted download
continues with the file it was on. (huggingface_hub >= 1.x deletes a file's partial temp file when its
transfer fails, so a single large file restarts from zero; transient network errors inside one run are
resumed by the library with HTTP Range requests.)

`HF_HUB_OFFLINE=1` is honoured here before any network code runs. A token passed as `token=` (the GUI
resolves the user's env:/keyring: reference) goes to huggingface_hub's calls directly, never through this
process's environment; without one huggingface_hub resolves it (HF_TOKEN, or the token stored by
`hf auth login`). Tokens are never printed or logged.

The local cache itself (location, status, disk usage, delete; no network) lives in `hub_cache.py`; its names
are re-exported here, the import path the CLI, GUI and loaders use.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from ..base.errors import GatedModelError, JobCancelled, ModelError, NemoError
from ..base.job_context import JobContext
from ..base.secrets import register_secret
from .hub_cache import (  # noqa: F401 - re-exported: callers import the cache API from here
    EntryStatus, RepoStatus, RepoUsage, _filter, _is_commit, cached_commit, delete_repo, disk_usage,
    entry_status, is_local_source, offline_mode, repo_folder, repo_status, require_snapshot, resolve_cache_dir,
    select_files, weights_not_found,
)


HUB_URL = "https://huggingface.co"
TOKEN_HELP = ("create a read token at https://huggingface.co/settings/tokens and either run `hf auth login` "
              "or set the HF_TOKEN environment variable")
_PROGRESS_INTERVAL_S = 0.1


def _endpoint() -> str | None:
    # huggingface_hub reads HF_ENDPOINT once at import; read it per call so a changed environment applies.
    return os.environ.get("HF_ENDPOINT") or None


# -- errors ----------------------------------------------------------------------------------------------

def gated_error(repo_id: str, *, have_token: bool, detail: str | None = None) -> GatedModelError:
    page = f"{HUB_URL}/{repo_id}"
    if have_token:
        msg = f"{repo_id} is a gated model and your Hugging Face token has no access to it yet."
        hint = (f"Open {page}, log in with the account of your token and accept the license; access is usually "
                f"granted at once. Then run the download again.")
    else:
        msg = f"{repo_id} is a gated model: downloading it needs a Hugging Face token and an accepted license."
        hint = f"Open {page}, log in and accept the license, then {TOKEN_HELP}."
    return GatedModelError(msg, hint=hint, detail=detail)


def translate_hub_error(exc: BaseException, repo_id: str, *, revision: str | None = None,
                        have_token: bool | None = None) -> NemoError | None:
    """A user-facing NemoError for a huggingface_hub / network exception, or None if it is none of those.

    `have_token`: whether the failed call sent a token; None = whether huggingface_hub finds one itself."""
    from huggingface_hub import errors as hf_errors

    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, hf_errors.GatedRepoError):
        return gated_error(repo_id, have_token=_have_token() if have_token is None else have_token, detail=detail)
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return ModelError(f"Revision '{revision}' of {repo_id} does not exist on the Hugging Face Hub.",
                          hint="Check the revision (branch, tag or commit) in the catalog entry or model spec.",
                          detail=detail)
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return ModelError(f"{repo_id} was not found on the Hugging Face Hub (or it is private).",
                          hint=f"Check the repository id at {HUB_URL}/{repo_id}. For a private or gated repository, "
                               f"{TOKEN_HELP}.", detail=detail)
    if isinstance(exc, (hf_errors.OfflineModeIsEnabled, hf_errors.LocalEntryNotFoundError)):
        return weights_not_found(repo_id)
    if isinstance(exc, hf_errors.HfHubHTTPError) or _is_network_error(exc):
        return ModelError(f"Could not download {repo_id} from the Hugging Face Hub.",
                          hint="Check the internet connection (and HTTPS_PROXY if you use a proxy), then run the "
                               "download again: files already downloaded are kept.", detail=detail)
    return None


def _is_network_error(exc: BaseException) -> bool:
    try:
        import httpx2 as httpx  # the HTTP client of huggingface_hub >= 2
    except ImportError:
        try:
            import httpx
        except ImportError:
            return isinstance(exc, (ConnectionError, TimeoutError))
    return isinstance(exc, (httpx.TransportError, ConnectionError, TimeoutError))


def _have_token() -> bool:
    from huggingface_hub import get_token

    return get_token() is not None


# -- download --------------------------------------------------------------------------------------------

class _ByteMeter:
    """Shared byte counter of one download: reports progress (throttled) with a rate, and cancels."""

    def __init__(self, ctx: JobContext, stage: str, total: int, already: int):
        self.ctx, self.stage, self.total = ctx, stage, total
        self.done = already
        self._lock = threading.Lock()
        self._t0, self._done0 = time.monotonic(), already
        self._last_report = 0.0
        self.current = ""
        self._abort = threading.Event()  # set when another file failed: stop without marking a user cancel

    def abort(self) -> None:
        self._abort.set()

    def check(self) -> None:
        """Raise JobCancelled when the user cancelled or another file of this download failed."""
        if self.ctx.cancelled or self._abort.is_set():
            raise JobCancelled("Download cancelled; files already downloaded are kept.")

    def add(self, n: int, *, force: bool = False) -> None:
        with self._lock:
            self.done += n
            now = time.monotonic()
            if not force and now - self._last_report < _PROGRESS_INTERVAL_S:
                return
            self._last_report = now
            elapsed = now - self._t0
            rate = (self.done - self._done0) / elapsed if elapsed > 0 else None
            self.ctx.progress(self.stage, self.done, self.total, self.current, rate=rate)


def _file_bar_class(meter: _ByteMeter) -> type:
    """A tqdm-compatible class for hf_hub_download: `update(n)` = bytes written, raising JobCancelled.

    Having `update_transfer` makes huggingface_hub route both HTTP and Xet transfers through one bar per
    file (its "aggregated" protocol), so `update` counts bytes of the file on disk exactly once.
    """

    class FileBar:
        def __init__(self, *args, total=None, initial=0, desc=None, **kwargs):
            self.n, self.total, self.desc = 0, total, desc
            if desc:
                meter.current = str(desc)
            if initial:
                self.update(initial)

        def update(self, n=1):
            meter.check()
            n = int(n or 0)
            self.n += n
            meter.add(n)

        def update_transfer(self, n=1):  # network bytes (compressed/deduplicated); progress counts disk bytes
            meter.check()

        def set_postfix_str(self, *a, **k): pass
        def set_transfer_postfix_str(self, *a, **k): pass
        def set_description(self, *a, **k): pass
        def set_description_str(self, *a, **k): pass
        def refresh(self, *a, **k): pass
        def close(self): pass
        def __enter__(self): return self
        def __exit__(self, *exc): return False

    return FileBar


def download_repo(repo_id: str, *, ctx: JobContext | None = None, revision: str | None = None,
                  cache_dir: str | None = None, allow_patterns: list[str] | None = None,
                  gated: bool | None = None, max_workers: int = 4, model_id: str | None = None,
                  token: str | None = None) -> str:
    """Download the files a loader needs into the hub cache; returns the snapshot folder.

    Progress: `ctx.progress("Downloading <repo>", bytes_done, bytes_total, current_file, rate=bytes/s)`.
    Cancel: `ctx.cancel_token.cancel()` stops between files and inside a running transfer (JobCancelled).
    Resume: files already cached are skipped. `gated=True` (from the catalog) fails early without a token.
    Token: `token` when given (sent to the Hub only, never logged), else huggingface_hub's own.
    """
    ctx = ctx or JobContext()
    cache = resolve_cache_dir(cache_dir)
    if offline_mode():
        status = repo_status(repo_id, revision, cache, allow_patterns)
        if status.downloaded:
            return status.snapshot_path  # type: ignore[return-value]
        raise weights_not_found(repo_id, status, model_id=model_id)
    token = token or None  # "" is no token: let huggingface_hub look for one
    register_secret(token)  # redacted from any log or error text that might quote it
    if gated and not (token or _have_token()):
        raise gated_error(repo_id, have_token=False)

    from huggingface_hub import HfApi

    stage = f"Downloading {repo_id}"
    ctx.progress(stage, 0, None, "listing files")
    try:
        info = HfApi(endpoint=_endpoint(), token=token).model_info(repo_id, revision=revision, files_metadata=True)
    except Exception as exc:  # noqa: BLE001 - translated below
        err = translate_hub_error(exc, repo_id, revision=revision, have_token=True if token else None)
        raise (err or exc) from exc
    if getattr(info, "gated", False) and not (token or _have_token()):
        raise gated_error(repo_id, have_token=False)
    sizes = {s.rfilename: int(s.size or 0) for s in (info.siblings or [])}
    files = _filter(sizes, allow_patterns)
    if not files:
        raise ModelError(f"{repo_id} has no files that NEMO Desktop can load.",
                         hint="Check that the repository holds safetensors or PyTorch weights.")
    snapshot = repo_folder(repo_id, cache) / "snapshots" / info.sha
    todo = [f for f in files if not (snapshot / f).exists()]
    meter = _ByteMeter(ctx, stage, sum(sizes[f] for f in files), sum(sizes[f] for f in files if f not in todo))
    meter.add(0, force=True)
    _fetch(repo_id, info.sha, todo, cache, meter, max_workers, token)
    _write_ref(repo_folder(repo_id, cache), revision or "main", info.sha)
    meter.current = "done"
    meter.add(0, force=True)
    return str(snapshot)


def _fetch(repo_id: str, commit: str, files: list[str], cache: str, meter: _ByteMeter, max_workers: int,
           token: str | None) -> None:
    from huggingface_hub import hf_hub_download

    bar = _file_bar_class(meter)

    def one(filename: str) -> None:
        meter.check()  # between files
        try:
            hf_hub_download(repo_id, filename, revision=commit, cache_dir=cache, endpoint=_endpoint(),
                            tqdm_class=bar, token=token)
        except JobCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - translated below
            raise (translate_hub_error(exc, repo_id, have_token=True if token else None) or exc) from exc

    pool = ThreadPoolExecutor(max_workers=max(1, max_workers), thread_name_prefix="nemo-download")
    futures = [pool.submit(one, f) for f in files]
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
        for fut in futures:
            if fut.done() and fut.exception() is not None:
                raise fut.exception()  # type: ignore[misc]
    except BaseException:
        # Ctrl-C in the caller's thread or one failed file: stop the others at their next chunk.
        meter.abort()
        for fut in futures:
            fut.cancel()
        raise
    finally:
        pool.shutdown(wait=True)


def _write_ref(folder: Path, revision: str, commit: str) -> None:
    if _is_commit(revision):
        return
    ref = folder / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref.with_name(ref.name + ".tmp")
    tmp.write_text(commit)
    os.replace(tmp, ref)
