"""Device and dtype choice, and CUDA out-of-memory turned into a clear, recoverable error."""
from __future__ import annotations

import warnings

import pytest

from nemo_desktop.core.base.errors import ConfigError, OutOfMemoryError
from nemo_desktop.core.base.job_context import run_job
from nemo_desktop.core.base import device

torch = pytest.importorskip("torch")


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.parametrize("exc", [
    torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.64 GiB total)"),
    RuntimeError("CUDA out of memory. Tried to allocate 1.50 GiB"),
    RuntimeError("CUDA error: out of memory"),
])
def test_oom_becomes_an_error_with_concrete_suggestions(exc, monkeypatch):
    freed = []
    monkeypatch.setattr(device, "free_memory", lambda: freed.append(True))
    err = device.translate_oom(exc, what="Image editing")
    assert isinstance(err, OutOfMemoryError)
    assert err.message == "Image editing ran out of GPU memory."
    for suggestion in ("lower editing resolution", "CPU offload", "smaller multimodal LLM", "bfloat16", "Unload"):
        assert suggestion in err.hint
    assert str(exc) in err.detail
    assert freed == [True]  # cached blocks released so the next job starts clean


@pytest.mark.parametrize("exc", [RuntimeError("expected scalar type Float"), ValueError("out of memory"),
                                 KeyError("x")])
def test_other_errors_are_not_oom(exc):
    assert device.translate_oom(exc) is None


def test_a_job_that_runs_out_of_memory_fails_cleanly():
    def job(ctx):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory.")

    outcome = run_job(job)
    assert outcome.status == "failed"
    assert outcome.error["type"] == "OutOfMemoryError" and "offload" in outcome.error["hint"]
    assert run_job(lambda ctx: 42).result == 42  # the process stays usable


def test_auto_device_on_cpu_warns_visibly_once(no_gpu, caplog, monkeypatch):
    monkeypatch.setattr(device, "_cpu_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a log record only: with logging.captureWarnings a warning printed twice
        assert device.resolve_device("auto") == "cpu"
        assert device.resolve_device("auto") == "cpu"  # a second model of the same command
    records = [r for r in caplog.records if "No CUDA GPU found" in r.getMessage()]
    assert len(records) == 1 and records[0].levelname == "WARNING" and "running on the CPU" in records[0].message


def test_auto_device_with_a_gpu_is_cuda_without_warning(fake_gpu):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert device.resolve_device("auto") == "cuda"
        assert device.resolve_device(None) == "cuda"


def test_explicit_devices(no_gpu):
    assert device.resolve_device("cpu") == "cpu"
    with pytest.raises(ConfigError) as err:
        device.resolve_device("cuda:1")
    assert "cpu" in err.value.hint


def test_resolve_dtype(monkeypatch):
    assert device.resolve_dtype("auto", "cpu") is torch.float32
    assert device.resolve_dtype(None, "cpu") is torch.float32
    assert device.resolve_dtype("bfloat16", "cpu") is torch.bfloat16
    assert device.resolve_dtype("float16", "cuda") is torch.float16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert device.resolve_dtype("auto", "cuda") is torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # e.g. a Turing card
    assert device.resolve_dtype("auto", "cuda:0") is torch.float16
    with pytest.raises(ConfigError, match="int8"):
        device.resolve_dtype("int8", "cpu")


def test_gpu_info_is_empty_without_a_gpu(no_gpu):
    assert device.gpu_info() == []
    device.free_memory()  # harmless without a GPU


@pytest.mark.parametrize("exc", [
    RuntimeError("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported"),
    RuntimeError("CUDA error: an illegal memory access was encountered"),
    RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k)`"),
])
def test_a_failed_cuda_kernel_is_said_in_words_not_as_a_bug_of_ours(exc):
    """What the model process reports when a kernel asserts (seen on an H200: the message had read 'Unexpected
    error ... This is probably a bug in NEMO Desktop')."""
    from nemo_desktop.core.base.job_context import describe_exception

    said = describe_exception(exc)
    assert said["message"].startswith("The model failed on the GPU (") and "Unexpected" not in said["message"]
    assert "bug in NEMO" not in said["hint"] and "CPU" in said["hint"]
    assert str(exc).splitlines()[0] in said["detail"]  # the original text stays in the details
    assert device.translate_cuda_error(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")) is None
    assert device.translate_cuda_error(ValueError("bad shape")) is None
