"""Device and dtype choice, and turning out-of-memory into a clear, recoverable error.

torch is imported lazily so that importing this module (e.g. from the job contract) stays cheap.
"""
from __future__ import annotations

import gc
import logging
import sys

from nemo_desktop.core.base.errors import ConfigError, ModelError, OutOfMemoryError

log = logging.getLogger(__name__)

DTYPES = ("auto", "float32", "float16", "bfloat16")

OOM_SUGGESTIONS = (
    "Try one of: a lower editing resolution; enabling CPU offload for the editor; a smaller multimodal "
    "LLM (e.g. Qwen2.5-VL-3B or Qwen3-VL-2B instead of 7B/8B); bfloat16 instead of float32; unloading "
    "models you are not using (Model manager > Unload)."
)


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_device(requested: str | None = "auto") -> str:
    """'auto' -> 'cuda' when a GPU is usable, else 'cpu' with a visible warning."""
    requested = (requested or "auto").lower()
    if requested == "auto":
        if cuda_available():
            return "cuda"
        _warn_cpu_once()
        return "cpu"
    if requested.startswith("cuda") and not cuda_available():
        raise ConfigError(f"Device '{requested}' was requested but no CUDA GPU is available.",
                          hint="Choose device 'cpu' or 'auto', or check the NVIDIA driver with `nemo doctor`.")
    return requested


_cpu_warned = False


def _warn_cpu_once() -> None:
    """One visible warning per process that models run on the CPU (a command loading three models, or
    logging.captureWarnings routing a warning into the log handlers too, used to print it several times)."""
    global _cpu_warned
    if _cpu_warned:
        return
    _cpu_warned = True
    log.warning("No CUDA GPU found: running on the CPU, which is much slower.")


def resolve_dtype(requested: str | None, device: str):
    """'auto' -> bfloat16 on GPUs that support it, float16 on older GPUs, float32 on CPU."""
    import torch

    requested = (requested or "auto").lower()
    if requested not in DTYPES:
        raise ConfigError(f"Unknown dtype '{requested}'.", hint=f"Choose one of: {', '.join(DTYPES)}.")
    if requested == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, requested)


def is_oom(exc: BaseException) -> bool:
    # Only look at torch if something already imported it: a torch OOM is impossible otherwise, and
    # importing torch here would cost seconds on the GUI thread for every unrelated error.
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    if isinstance(exc, MemoryError):  # host memory (or the model process's address-space cap) exhausted
        return True
    text = str(exc).lower()
    # torch's CPU allocator says "DefaultCPUAllocator: can't allocate memory: you tried to allocate ..."
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def translate_oom(exc: BaseException, what: str = "The model") -> OutOfMemoryError | None:
    """Return a clear OutOfMemoryError for an OOM exception (after freeing cached memory), else None."""
    if not is_oom(exc):
        return None
    free_memory()
    text = str(exc).lower()
    where = "host (CPU) memory" if isinstance(exc, MemoryError) or "cpuallocator" in text else "GPU memory"
    return OutOfMemoryError(f"{what} ran out of {where}.", hint=OOM_SUGGESTIONS, detail=str(exc))


# What CUDA says when a kernel failed: the process's CUDA context is unusable afterwards (not an out-of-memory error,
# which translate_oom handles first).
_CUDA_FAULTS = ("device-side assert", "cuda error", "cublas_status", "cudnn_status", "illegal memory access",
                "unspecified launch failure")


def translate_cuda_error(exc: BaseException, what: str = "The model") -> ModelError | None:
    """A clear ModelError for a failed CUDA kernel (a device-side assert, an illegal memory access...), else None.
    Such an error comes from model code or the GPU, not from NEMO: the message says so in words."""
    text = str(exc)
    lower = text.lower()
    if is_oom(exc) or not any(fault in lower for fault in _CUDA_FAULTS):
        return None
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return ModelError(
        f"{what} failed on the GPU ({first.removeprefix('CUDA error: ')}).",
        hint="A device-side assert usually means the model was given an input it cannot handle (a class index or "
             "token id out of range, a wrong image size); an illegal memory access or launch failure can also be a "
             "driver or hardware fault. Run the job again; if it fails the same way with this model, run it on the "
             "CPU (device setting) for a readable error, and report it with the details below.",
        detail=text)


def free_memory() -> None:
    """Release Python garbage and CUDA's cached blocks so the next job starts clean."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def gpu_info() -> list[dict]:
    """Name, total and free memory (bytes) of every visible CUDA device; [] without one."""
    if not cuda_available():
        return []
    import torch

    out = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        out.append({"index": i, "name": torch.cuda.get_device_name(i), "total_bytes": int(total),
                    "free_bytes": int(free)})
    return out
