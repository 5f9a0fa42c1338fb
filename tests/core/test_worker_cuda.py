"""The model worker on a CUDA GPU (skipped without one): unloading returns the GPU memory, and a CUDA device-side
assert fails the job in words, the worker is replaced, and the next job runs on the GPU in the new one.

Needs torch (with CUDA), numpy, pillow, safetensors, timm and platformdirs, never PySide6. Run it with pytest
(`pytest -s tests/core/test_worker_cuda.py`) or as a script (`python tests/core/test_worker_cuda.py`); it prints
its figures either way and takes well under 90 s (two worker starts, two CUDA initialisations, a random
ResNet-50 written and loaded twice).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

try:
    import pytest
except ImportError:  # run as a script where pytest is not installed
    pytest = None

if __package__ in (None, ""):  # as a script: the repository's package and this folder (the worker imports us)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))

MB = 1024 ** 2
THIS = Path(__file__).stem  # the worker imports this module by this name (its folder is on the worker's sys.path)


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


# -- job functions, run in the worker process (JobSpec targets) ------------------------------------------------
def gpu_memory(session, ctx) -> dict:
    """The worker's CUDA memory as torch's allocator sees it (after collecting garbage)."""
    import gc

    import torch

    gc.collect()
    if not torch.cuda.is_initialized():
        return {"allocated": 0, "reserved": 0, "pid": os.getpid(), "initialized": False}
    torch.cuda.synchronize()
    return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
            "pid": os.getpid(), "initialized": True}


def classify_random(session, ctx) -> dict:
    """Run the worker's classifier once on a random image; where its weights are and its top class."""
    import numpy as np
    from PIL import Image

    clf = session.get("classifier")
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (224, 224, 3), dtype=np.uint8))
    probs = clf.predict_proba([image])[0]
    model = getattr(clf, "model", None)
    device = str(next(model.parameters()).device) if model is not None else "unknown"
    return {"device": device, "top": int(np.argmax(probs)), "pid": os.getpid()}


def device_side_assert(session, ctx) -> None:
    """An index out of range inside a CUDA kernel: the device-side assert leaves this process's CUDA context
    unusable until it exits."""
    import torch

    x = torch.zeros(8, device="cuda")
    index = torch.tensor([1000], device="cuda")
    y = x[index]  # the indexing kernel asserts on the device
    torch.cuda.synchronize()
    return float(y.sum())


# -- the check --------------------------------------------------------------------------------------------------
def _build_resnet(folder: Path) -> Path:
    import timm
    import torch

    torch.manual_seed(0)
    model = timm.create_model("resnet50", pretrained=False, num_classes=10)
    timm.models.save_for_hf(model, str(folder), model_config={"label_names": [f"c{i}" for i in range(10)]},
                            safe_serialization=True, data_config={"input_size": (3, 224, 224), "crop_pct": 1.0})
    return folder


def _device_used(torch) -> int:
    free, total = torch.cuda.mem_get_info()
    return total - free


def run_check(say=print) -> dict:
    """Everything the module checks, with its figures said as it goes; returns them (assertion errors on failure)."""
    import torch

    from nemo_desktop.core.base.errors import NemoError
    from nemo_desktop.core.base.job_context import null_context
    from nemo_desktop.core.store.paths import get_paths
    from nemo_desktop.core.store.settings import load_settings, save_settings
    from nemo_desktop.core.app.worker import JobSpec, WorkerConfig, WorkerSupervisor

    t0 = time.perf_counter()
    home = Path(tempfile.mkdtemp(prefix="nemo-cuda-worker-"))
    paths = get_paths(home=str(home / "home"))
    settings = load_settings(paths)
    settings.compute.device, settings.compute.dtype = "cuda", "float32"
    save_settings(settings, paths)
    ref = f"timm:local-dir:{_build_resnet(home / 'resnet50')}"
    params_mb = sum(p.numel() for p in __import__("timm").create_model("resnet50", num_classes=10).parameters()) \
        * 4 / MB
    figures: dict = {"weights_mb": round(params_mb, 1)}
    say(f"random ResNet-50 written ({params_mb:.0f} MB of float32 weights) in {time.perf_counter() - t0:.1f} s")

    sup = WorkerSupervisor(WorkerConfig(paths=paths), grace_s=10.0)
    ctx = null_context()

    def run(target, *args):
        return sup.run(JobSpec(target, args), ctx)

    try:
        sup.start()
        device_before = _device_used(torch)  # the parent's own context is counted from here on
        empty = run(f"{THIS}:gpu_memory")
        run("nemo_desktop.core.app.jobs.models:load_model", "classifier", ref)
        used = run(f"{THIS}:classify_random")
        loaded = run(f"{THIS}:gpu_memory")
        device_loaded = _device_used(torch)
        say(f"loaded in the worker (pid {used['pid']}) on {used['device']}: torch allocated "
            f"{loaded['allocated'] / MB:.0f} MB, reserved {loaded['reserved'] / MB:.0f} MB; device memory in use "
            f"{(device_loaded - device_before) / MB:+.0f} MB since the worker started")
        assert used["device"].startswith("cuda"), used
        assert loaded["allocated"] - empty["allocated"] >= 0.8 * params_mb * MB, (empty, loaded)

        pid = sup.pid
        assert run("nemo_desktop.core.app.jobs.models:unload_model", "classifier") is True
        after = run(f"{THIS}:gpu_memory")
        device_after = _device_used(torch)
        say(f"after Unload (worker pid {after['pid']}, {'same' if after['pid'] == pid else 'a new'} worker): "
            f"torch allocated {after['allocated'] / MB:.0f} MB, reserved {after['reserved'] / MB:.0f} MB; device "
            f"memory in use {(device_after - device_before) / MB:+.0f} MB since the worker started "
            f"({(device_loaded - device_after) / MB:.0f} MB returned)")
        # What is left may be a library's workspace (cuBLAS keeps one per handle), never the weights: at least 80 %
        # of them is gone from torch's allocations, from its cache (empty_cache) and from the device.
        assert loaded["allocated"] - after["allocated"] >= 0.8 * params_mb * MB, (loaded, after)
        assert loaded["reserved"] - after["reserved"] >= 0.8 * params_mb * MB, (loaded, after)
        assert device_loaded - device_after >= 0.8 * params_mb * MB, (device_loaded, device_after)
        figures.update(allocated_loaded_mb=loaded["allocated"] / MB, allocated_after_unload_mb=after["allocated"] / MB,
                       reserved_after_unload_mb=after["reserved"] / MB,
                       device_returned_mb=(device_loaded - device_after) / MB)

        # A device-side assert: the job fails in words, the worker is replaced, the next job runs on the GPU.
        run("nemo_desktop.core.app.jobs.models:load_model", "classifier", ref)
        pid, restarts = sup.pid, sup.restarts
        t = time.perf_counter()
        try:
            run(f"{THIS}:device_side_assert")
        except NemoError as exc:
            error = exc
        else:
            raise AssertionError("the device-side assert did not fail the job")
        text = f"{error.message} {error.hint or ''}"
        say(f"device-side assert: the job failed in {time.perf_counter() - t:.1f} s with: {error.message!r}; "
            f"hint: {error.hint!r}")
        assert "CUDA" in text or "SIGABRT" in text, text
        assert "bug in NEMO" not in text, text  # a kernel's assert is the model's or the GPU's, said in words
        assert sup.restarts == restarts + 1 and sup.pid not in (None, pid), (sup.restarts, sup.pid, pid)
        assert sup.loaded() == {}  # the models went with the old worker
        t = time.perf_counter()
        run("nemo_desktop.core.app.jobs.models:load_model", "classifier", ref)
        again = run(f"{THIS}:classify_random")
        say(f"the new worker (pid {again['pid']}) loaded the classifier again and ran it on {again['device']} in "
            f"{time.perf_counter() - t:.1f} s (top class {again['top']}, before the assert {used['top']})")
        assert again["device"].startswith("cuda") and again["pid"] == sup.pid != pid
        assert again["top"] == used["top"]
        figures.update(assert_message=error.message, restarted=True)
    finally:
        sup.stop()
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    say(f"done in {figures['seconds']} s")
    return figures


if pytest is not None:
    @pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
    def test_unload_returns_gpu_memory_and_a_cuda_error_replaces_the_worker():
        run_check()


if __name__ == "__main__":
    if not _cuda():
        print("no CUDA GPU: nothing checked")
        sys.exit(0)
    run_check()
    print("OK")
