"""Job functions for the model worker's tests (tests/core/test_worker_process.py, tests/gui/test_gui_worker.py).

They live in tests/, which conftest puts on the PYTHONPATH of child processes, so that the spawned worker can
import them by name (`JobSpec("worker_test_jobs:...")`).
"""
from __future__ import annotations

import os
import time


def pid(session, ctx) -> int:
    return os.getpid()


def steps(session, n: int, delay: float, ctx) -> int:
    """n cooperative steps (checks cancel between them), each a partial result."""
    for i in ctx.track(range(n), stage="Stepping"):
        time.sleep(delay)
        ctx.partial(i)
    return n


def native_sleep(session, seconds: float, ctx) -> str:
    """One long native call that no cancel check reaches (time.sleep in C), as a model load is."""
    ctx.progress("Models: Loading the image editor stuck-editor", 0, None)
    time.sleep(seconds)
    return "woke up"


def fail(session, ctx) -> None:
    from nemo_desktop.core.base.errors import ConfigError

    raise ConfigError("No image editor is chosen.", hint="Load one in the Model manager.")


def cuda_error(session, ctx) -> None:
    raise RuntimeError("CUDA error: device-side assert triggered")


def put_model(session, kind: str, ref: str, ctx) -> dict:
    session.put(kind, ref, object())
    return session.loaded()


def put_models(session, models: dict, ctx) -> dict:
    """Put already built models ({kind: (ref, model)}) into the worker's session."""
    for kind, (ref, model) in models.items():
        session.put(kind, ref, model)
    return session.loaded()


# A classifier family whose "weights" are `source` bytes of host memory: loading one bigger than the worker's
# memory cap fails as a real large load does.
from nemo_desktop.core.models.families import register_family  # noqa: E402


@register_family("classifier", "test-ballast")
def _load_ballast(spec, options):
    size = int(spec.source)
    data = bytearray(size)  # committed, not lazily mapped
    data[::4096] = b"\x01" * len(data[::4096])

    class Ballast:
        zero_shot = False

        def __init__(self):
            self.data = data

    return Ballast()


def load_ballast(session, size: int, ctx) -> str:
    return session.load("classifier", f"test-ballast:{size}", ctx).ref


# The digits world (tests/core/methods/digits_world.py) as model families, so that the worker loads its models
# by ref, as it loads real ones (and loads them again after a restart): the classifier's source is a state
# dict saved by the test; the MLLM's source "slow:S" makes each of its answers take S seconds.
@register_family("classifier", "test-digits")
def _load_digits_cnn(spec, options):
    import torch
    from digits_world import DigitsCNN, DigitsCNNClassifier

    model = DigitsCNN()
    model.load_state_dict(torch.load(spec.source, weights_only=True))
    model.eval()
    return DigitsCNNClassifier(model)


@register_family("mllm", "test-digits")
def _load_digits_mllm(spec, options):
    from digits_world import ScriptedDigitsMLLM

    delay = float(spec.source.partition(":")[2] or 0) if spec.source.startswith("slow") else 0.0

    class Slow(ScriptedDigitsMLLM):
        def chat(self, messages, **kw):
            time.sleep(delay)
            return super().chat(messages, **kw)

    return Slow()


@register_family("editor", "test-digits")
def _load_digits_editor(spec, options):
    from digits_world import DigitsEditor

    return DigitsEditor()


def store_puts(session, n: int, ctx) -> int:
    """n results with a 256 KiB artifact each into the session's store; each key is a partial once committed."""
    import hashlib

    store = session.store()
    for i in range(n):
        blob = os.urandom(256 * 1024)
        key = f"worker-put-{i}"
        store.put(key, "worker-test", {"i": i, "blob_sha256": hashlib.sha256(blob).hexdigest()}, {"blob": blob})
        ctx.partial(key)
    return n


def classifier_dtype(session, ctx) -> str:
    """The torch dtype the session's classifier runs in (a restore must load it with the first load's options)."""
    return str(session.get("classifier").dtype)
