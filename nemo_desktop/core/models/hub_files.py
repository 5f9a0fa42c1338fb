"""Fetch single files of a Hugging Face repository (or find them in the cache) for the classifier loaders.

Loaders call `fetch_file` for what they need, then load from the local snapshot folder, so a Hub model
and a folder on disk go through the same library code. The snapshot folder's name is the commit hash,
which becomes `ModelInfo.revision`. Offline mode (`HF_HUB_OFFLINE=1` or `LoadOptions.local_files_only`)
never touches the network and turns a cache miss into WeightsNotFoundError. The cache location (portable
mode included) comes from `hub_cache.py` and the wording of Hub errors from `downloads.py`, the places that
own them.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from ..base.errors import ModelError
from ..store.keys import content_hash
from .downloads import offline_mode, resolve_cache_dir, translate_hub_error, weights_not_found
from .families import LoadOptions

_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


def offline_requested(options: LoadOptions) -> bool:
    """LoadOptions.local_files_only wins; None follows HF_HUB_OFFLINE (read now, not at import)."""
    if options.local_files_only is not None:
        return bool(options.local_files_only)
    return offline_mode()


def hub_unresolvable() -> bool:
    """True when the Hub's host name cannot be resolved (no network, no DNS): then a fetch would spend ~30 s in
    huggingface_hub's retries (measured: 30.2 s for one missing classifier) before saying what the cache already
    says. The lookup answers in milliseconds when there is no network; any other outcome means "try the Hub"."""
    import socket
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname
    try:
        socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return True
    except Exception:  # noqa: BLE001 - anything else (a proxy, a sandbox): let the Hub client decide
        return False
    return False


def cache_dir_for(options: LoadOptions) -> str:
    return resolve_cache_dir(options.cache_dir)


def fetch_file(repo_id: str, filename: str, options: LoadOptions, *, revision: str | None = None,
               required: bool = True, model_id: str | None = None) -> Path | None:
    """Local path of `filename` in `repo_id` (downloaded unless offline). With required=False a file that
    the repository (or, offline, the cache) does not have gives None instead of an error. `model_id` (a
    catalog id) is what the error hint tells the user to download."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub import errors as hf_errors

    local_only = offline_requested(options)
    if not local_only and hub_unresolvable():  # no network: the cache answers at once, no retries
        local_only = True
    try:
        path = hf_hub_download(repo_id, filename, revision=revision, cache_dir=cache_dir_for(options),
                               local_files_only=local_only)
    except hf_errors.EntryNotFoundError as exc:  # remote: no such file; local: not in the cache
        if not required:
            return None
        if isinstance(exc, hf_errors.LocalEntryNotFoundError):
            raise weights_not_found(repo_id, model_id=model_id) from exc
        raise ModelError(f"{repo_id} has no file '{filename}'.", hint="Check that the repository holds a model "
                         "of the expected library and format.", detail=repr(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - translated when it is a Hub/network error, else re-raised
        err = translate_hub_error(exc, repo_id, revision=revision)
        if err is None:
            raise
        raise err from exc
    return Path(path)


def fetch_first(repo_id: str, filenames: Sequence[str], options: LoadOptions, *,
                revision: str | None = None, model_id: str | None = None) -> Path:
    """The first of `filenames` the repository has (safetensors listed before pickle files)."""
    for name in filenames:
        path = fetch_file(repo_id, name, options, revision=revision, required=False)
        if path is not None:
            return path
    if offline_requested(options) or hub_unresolvable():
        raise weights_not_found(repo_id, model_id=model_id)
    raise ModelError(f"{repo_id} has none of the expected weight files ({', '.join(filenames)}).",
                     hint="Check that the repository holds a model of the expected library and format.")


def commit_from_path(path: str | os.PathLike) -> str | None:
    """The commit hash when `path` lies in a Hugging Face cache snapshot (…/snapshots/<commit>/…)."""
    parts = Path(os.path.abspath(path)).parts  # not resolve(): cache files are symlinks into blobs/
    for i, part in enumerate(parts[:-1]):
        if part == "snapshots" and _COMMIT_RE.match(parts[i + 1]):
            return parts[i + 1]
    return None


def weights_revision(weights_file: str | os.PathLike) -> str:
    """What pins a weights file: its cache commit hash, else `sha256:<hex>` of its bytes."""
    return commit_from_path(weights_file) or f"sha256:{content_hash(weights_file)}"
