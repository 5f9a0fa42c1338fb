"""Loading a diffusers pipeline, shared by the image editors (diffusers_editor.py) and the text-to-image
generators (diffusers_t2i.py): find the weights (a local folder saved with `save_pretrained`, or a Hub repository
in the local cache; offline never touches the network), load them with `DiffusionPipeline.from_pretrained`
(safetensors only, no remote code) in the chosen dtype, refuse a pipeline class the family does not support
before it takes device memory, then place it on the device or set up CPU offload, with CUDA out-of-memory
turned into a clear error. Also what both do to give the memory back (after a stopped run, on unload).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...base.errors import ConfigError, JobCancelled, ModelError
from ...base.device import free_memory, resolve_device, resolve_dtype, translate_oom
from ..families import LoadOptions, ModelSpec

log = logging.getLogger(__name__)

OFFLOAD_MODES = ("model", "sequential")


def local_revision(folder: Path) -> str:
    """A fingerprint of a local checkpoint folder (configs' content, weight files' names and sizes)."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            rel = p.relative_to(folder).as_posix()
            h.update(rel.encode())
            h.update(p.read_bytes() if p.suffix == ".json" else str(p.stat().st_size).encode())
    return "local-" + h.hexdigest()[:16]


def weights_folder(spec: ModelSpec, options: LoadOptions) -> tuple[str, str | None]:
    """The folder to load from and the revision that pins it; never touches the network when offline."""
    from .. import downloads

    local = Path(spec.source).expanduser()
    if local.is_dir():
        return str(local), local_revision(local)
    cache = downloads.resolve_cache_dir(options.cache_dir)
    status = downloads.repo_status(spec.source, spec.revision, cache)
    if status.downloaded:
        return status.snapshot_path, status.commit  # type: ignore[return-value]
    offline = options.local_files_only if options.local_files_only is not None else downloads.offline_mode()
    if offline:
        raise downloads.weights_not_found(spec.source, status, model_id=spec.catalog_id)
    entry = None
    if spec.catalog_id:
        from ..catalog import get_entry

        entry = get_entry(spec.catalog_id)
    log.info("%s is not in the cache: downloading it before loading", spec.source)
    path = downloads.download_repo(
        spec.source, revision=spec.revision, cache_dir=cache, model_id=spec.model_id,
        allow_patterns=list(entry.allow_patterns) if entry and entry.allow_patterns else None,
        gated=entry.gated if entry else None)
    return path, Path(path).name


def dtype_kwarg() -> str:
    # diffusers renamed `torch_dtype` to `dtype` in 2026 (PR 14205); older releases reject `dtype`.
    try:
        from diffusers.utils.deprecation_utils import _resolve_dtype  # noqa: F401
    except ImportError:
        return "torch_dtype"
    return "dtype"


@dataclass(frozen=True)
class LoadedPipeline:
    """A pipeline on its device, with what loaded it (every field goes into the model's ModelInfo.extra)."""

    pipe: Any
    revision: str | None
    device: str
    dtype: Any
    offload: str | None

    @property
    def name(self) -> str:
        return type(self.pipe).__name__

    def extra(self) -> dict[str, Any]:
        return {"pipeline": self.name, "dtype": str(self.dtype).replace("torch.", ""), "device": self.device,
                "offload": self.offload}


def load_pipeline(spec: ModelSpec, options: LoadOptions, *, role: str, accepted: tuple[str, ...],
                  expected: str, before_placing: Callable[[Any, str], None] | None = None) -> LoadedPipeline:
    """Load `spec`'s diffusers pipeline, one of the classes `accepted`.

    role: what the model is, for messages ("editor", "generator"); expected: what a refused class is not
    ("a diffusers-flux-kontext editor"). Offload: the spec's option `offload` ("model" or "sequential") or
    LoadOptions.cpu_offload ("model"); without a CUDA device the pipeline runs unoffloaded, with a warning.
    before_placing(pipe, device): runs on the loaded pipeline while it is still on the host (e.g. quantisation,
    so the full-precision weights never have to fit the device)."""
    from diffusers import DiffusionPipeline

    folder, revision = weights_folder(spec, options)
    device = resolve_device(options.device)
    dtype = resolve_dtype(options.dtype, device)
    offload = spec.options.get("offload") or ("model" if options.cpu_offload else None)
    if offload is not None and offload not in OFFLOAD_MODES:
        raise ConfigError(f"Unknown offload mode '{offload}'.", hint="Use 'model' or 'sequential'.")
    try:
        pipe = DiffusionPipeline.from_pretrained(folder, use_safetensors=True, **{dtype_kwarg(): dtype})
    except (OSError, ValueError, KeyError) as exc:  # KeyError: a model_index.json without its class names
        raise ModelError(f"Could not load the {role} {spec.model_id} from {folder}.",
                         hint="The folder must hold a complete diffusers pipeline (model_index.json and its "
                              "component folders, safetensors weights); download it again if it is incomplete.",
                         detail=f"{type(exc).__name__}: {exc}") from exc
    name = type(pipe).__name__
    if name not in accepted:
        raise ConfigError(f"{spec.model_id} holds a {name}, not {expected}.",
                          hint=f"Supported pipelines: {', '.join(accepted)}.")
    if before_placing is not None:
        before_placing(pipe, device)
    try:
        if offload and device.startswith("cuda"):
            if offload == "sequential":
                pipe.enable_sequential_cpu_offload(device=device)
            else:
                pipe.enable_model_cpu_offload(device=device)
        else:
            if offload:
                log.warning("CPU offload needs a CUDA device; running %s on %s", spec.model_id, device)
            pipe.to(device)
    except Exception as exc:  # noqa: BLE001 - only OOM is translated; everything else propagates
        oom = translate_oom(exc, what=f"Loading {spec.model_id}")
        if oom is not None:
            del pipe
            free_memory()
            raise oom from exc
        raise
    return LoadedPipeline(pipe, revision, device, dtype, offload)


def release_offloaded(pipe: Any) -> None:
    """After a stopped or failed run: with CPU offload the last model stays on the GPU; put it back."""
    if getattr(pipe, "_offload_device", None) is not None:
        try:
            pipe.maybe_free_model_hooks()
        except Exception:  # noqa: BLE001 - best effort after a failure
            log.debug("could not release offloaded models", exc_info=True)
    free_memory()


def remove_hooks(pipe: Any) -> None:
    """Before dropping a pipeline: remove its offload hooks so nothing keeps its modules alive."""
    try:
        pipe.remove_all_hooks()
    except Exception:  # noqa: BLE001 - best effort: the pipeline is dropped either way
        log.debug("could not remove the offload hooks", exc_info=True)


def step_callback(steps: int | None, on_step: Any, what: str) -> Any:
    """diffusers' `callback_on_step_end`: reports step i of `steps` and, when `on_step` answers False, stops the
    loop (the pipeline's own `_interrupt`) and raises JobCancelled("<what> cancelled.")."""
    def callback(pipe, i, t, callback_kwargs):
        if on_step is not None and on_step(min(i + 1, steps or i + 1), steps) is False:
            pipe._interrupt = True
            raise JobCancelled(f"{what} cancelled.")
        return callback_kwargs

    return callback


class PipelineHolder:
    """What editors and generators share about the pipeline they hold: `pipe` guarded by `_lock`."""

    pipe: Any
    _lock: Any

    def _release_offloaded(self) -> None:
        release_offloaded(self.pipe)

    def unload(self) -> None:
        """Drop the pipeline and release its (GPU) memory; the process stays usable."""
        with self._lock:
            if self.pipe is not None:
                remove_hooks(self.pipe)
                self.pipe = None
        free_memory()
