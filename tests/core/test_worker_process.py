"""The GPU lane's model worker process (core/app/worker): jobs run in a spawned child, and the app survives it.

Checked without Qt: a SIGKILL in the middle of a job (the job fails naming the cause and what it was doing,
a new worker starts, the next job works), a memory cap (RLIMIT_AS) that a model load exceeds (a clear
out-of-memory message naming the load), Cancel of a job stuck in one native call (cancelled within the grace
period + 1 s, the worker replaced), cooperative cancel (same worker), failures with the worker's own message,
progress / partial results / logs over the pipe, and the model list following the worker's real state.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time

import pytest

from nemo_desktop.core.base.errors import JobCancelled, NemoError, OutOfMemoryError
from nemo_desktop.core.base.job_context import CancelToken, JobContext, run_job
from nemo_desktop.core.app.worker import JobSpec, WorkerConfig, WorkerDied, WorkerSupervisor, describe_exit


def spec(name: str, *args) -> JobSpec:
    return JobSpec(f"worker_test_jobs:{name}", args)


@pytest.fixture
def make_supervisor():
    made = []

    def make(**kw) -> WorkerSupervisor:
        grace = kw.pop("grace_s", 10.0)
        changes = kw.pop("on_models_changed", None)
        sup = WorkerSupervisor(WorkerConfig(**kw), grace_s=grace, on_models_changed=changes)
        made.append(sup)
        return sup

    yield make
    for sup in made:
        sup.stop(timeout_s=3)


def _kill_when(sup: WorkerSupervisor, ctx_progress: list, stage_part: str, timeout: float = 60) -> threading.Thread:
    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(stage_part in p.stage for p in list(ctx_progress)):
                os.kill(sup.pid, signal.SIGKILL)
                return
            time.sleep(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_jobs_run_in_a_child_with_progress_partials_and_logs(make_supervisor):
    sup = make_supervisor()
    ctx_pid = sup.run(spec("pid"), JobContext())
    assert ctx_pid != os.getpid() and ctx_pid == sup.pid
    seen, partials = [], []
    ctx = JobContext(on_progress=seen.append, on_partial=partials.append)
    assert sup.run(spec("steps", 3, 0.01), ctx) == 3
    assert partials == [0, 1, 2]
    assert seen[-1].stage == "Stepping" and seen[-1].done == 3
    # A failure comes back as the worker's own error: type, message and hint.
    outcome = run_job(lambda c: sup.run(spec("fail"), c))
    assert outcome.status == "failed"
    assert outcome.error["type"] == "ConfigError" and outcome.error["message"] == "No image editor is chosen."
    assert outcome.error["hint"] == "Load one in the Model manager."
    assert "worker_test_jobs.py" in outcome.error["detail"]  # the worker's traceback
    assert sup.pid == ctx_pid  # a plain failure keeps the worker (and its models)


def test_sigkill_mid_job_fails_it_with_the_cause_and_the_next_job_works(make_supervisor):
    changes = []
    sup = make_supervisor(on_models_changed=changes.append)
    assert sup.run(spec("put_model", "classifier", "digits-cnn"), JobContext()) == {"classifier": "digits-cnn"}
    assert sup.loaded() == {"classifier": "digits-cnn"}
    first_pid = sup.pid
    progress: list = []
    ctx = JobContext(on_progress=progress.append)
    _kill_when(sup, progress, "Loading the image editor")
    outcome = run_job(lambda c: sup.run(spec("native_sleep", 60), c, title="Diagnosing 1 image"), ctx)
    assert outcome.status == "failed" and outcome.seconds < 30
    message = outcome.error["message"]
    assert "model process was killed (SIGKILL)" in message or "ran out of memory" in message
    assert "while loading the image editor stuck-editor" in message
    assert "runs out of memory" in message or "ran out of memory" in message
    assert "new model process has been started" in outcome.error["hint"]
    # The models went with the process, the list says so, and a new worker answers.
    assert sup.loaded() == {} and changes[-1] == {}
    assert sup.run(spec("pid"), JobContext()) not in (first_pid, None)
    assert sup.restarts == 1


def test_a_worker_killed_between_jobs_is_replaced_and_the_list_follows_at_once(make_supervisor):
    changes = []
    sup = make_supervisor(on_models_changed=changes.append)
    sup.run(spec("put_model", "classifier", "digits-cnn"), JobContext())
    first_pid = sup.pid
    os.kill(first_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (sup.loaded() or sup.pid == first_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sup.loaded() == {} and changes[-1] == {} and sup.pid != first_pid
    assert "killed (SIGKILL) while idle" in sup.last_exit.message
    assert sup.run(spec("pid"), JobContext()) == sup.pid != first_pid


def test_a_worker_killed_while_writing_the_store_leaves_nothing_half_written(make_supervisor):
    import hashlib

    from nemo_desktop.core.store import ResultsStore, maintenance

    sup = make_supervisor()
    committed: list[str] = []

    def on_partial(key):
        committed.append(key)
        if len(committed) == 6:
            os.kill(sup.pid, signal.SIGKILL)  # somewhere in the next put

    outcome = run_job(lambda c: sup.run(spec("store_puts", 10_000), c), JobContext(on_partial=on_partial))
    assert outcome.status == "failed" and "killed (SIGKILL)" in outcome.error["message"]
    with ResultsStore.open() as store:  # the app's own view of the same store
        rows = store.find("worker-test")
        keys = {r.key for r in rows}
        assert set(committed) <= keys  # every put the worker reported survived; none is half there (below)
        for r in rows:
            assert hashlib.sha256(r.artifact_bytes("blob")).hexdigest() == r.payload["blob_sha256"]
        problems = store.check()
        assert all(p.startswith((maintenance.PROBLEM_TMP, maintenance.PROBLEM_ORPHAN)) for p in problems), problems
    assert sup.run(spec("store_puts", 2), JobContext()) == 2  # the new worker writes to it again


def test_a_load_above_the_memory_cap_fails_with_an_out_of_memory_message(make_supervisor):
    # 5 GiB of address space: torch's libraries alone map about 3.3 GiB; the "model" wants 6 GiB more.
    sup = make_supervisor(memory_limit_bytes=5 * 1024 ** 3)
    assert sup.run(spec("steps", 1, 0), JobContext()) == 1  # the capped worker itself runs
    outcome = run_job(lambda c: sup.run(spec("load_ballast", 6 * 1024 ** 3), c))
    assert outcome.status == "failed"
    assert outcome.error["type"] == "OutOfMemoryError"
    assert outcome.error["message"] == "Loading the classifier test-ballast:6442450944 ran out of host (CPU) memory."
    assert "smaller" in outcome.error["hint"]
    # The worker is still there (the load failed, not the process) and holds no half-loaded model.
    assert sup.loaded() == {} and sup.restarts == 0
    assert sup.run(spec("load_ballast", 10 * 1024 ** 2), JobContext()) == f"test-ballast:{10 * 1024 ** 2}"
    assert sup.loaded() == {"classifier": f"test-ballast:{10 * 1024 ** 2}"}


def test_cancel_of_a_job_stuck_in_a_native_call_ends_within_the_grace_period(make_supervisor):
    grace = 1.5
    sup = make_supervisor(grace_s=grace)
    first_pid = sup.run(spec("pid"), JobContext())
    token = CancelToken()
    progress: list = []
    ctx = JobContext(on_progress=progress.append, cancel=token)
    asked = {}

    def cancel_when_loading():
        while not progress:
            time.sleep(0.02)
        asked["at"] = time.monotonic()
        token.cancel()

    threading.Thread(target=cancel_when_loading, daemon=True).start()
    outcome = run_job(lambda c: sup.run(spec("native_sleep", 120), c), ctx)
    took = time.monotonic() - asked["at"]
    assert outcome.status == "cancelled"
    assert took <= grace + 1.0, took
    assert "did not stop by itself within 1.5 s" in outcome.error["message"]
    assert "loading the image editor stuck-editor" in outcome.error["message"]
    assert sup.run(spec("pid"), JobContext()) != first_pid  # a new worker


def test_cooperative_cancel_keeps_the_worker(make_supervisor):
    sup = make_supervisor(grace_s=10)
    first_pid = sup.run(spec("pid"), JobContext())
    token = CancelToken()
    partials: list = []
    ctx = JobContext(on_partial=lambda r: (partials.append(r), len(partials) == 2 and token.cancel()), cancel=token)
    start = time.monotonic()
    outcome = run_job(lambda c: sup.run(spec("steps", 1000, 0.02), c), ctx)
    assert outcome.status == "cancelled" and time.monotonic() - start < 5
    assert 2 <= len(partials) < 1000
    assert sup.run(spec("pid"), JobContext()) == first_pid


def test_a_cuda_error_replaces_the_worker(make_supervisor):
    sup = make_supervisor()
    first_pid = sup.run(spec("put_model", "classifier", "c"), JobContext()) and sup.pid
    outcome = run_job(lambda c: sup.run(spec("cuda_error"), c))
    assert outcome.status == "failed" and "device-side assert" in outcome.error["message"]
    assert "restarted" in outcome.error["hint"]
    assert sup.loaded() == {} and sup.run(spec("pid"), JobContext()) != first_pid


def test_unload_returns_the_model_and_the_list_follows(make_supervisor):
    sup = make_supervisor()
    sup.run(JobSpec("worker_test_jobs:load_ballast", (64 * 1024 ** 2,)), JobContext())
    assert sup.loaded() == {"classifier": f"test-ballast:{64 * 1024 ** 2}"}
    assert sup.run(JobSpec("nemo_desktop.core.app.jobs.models:unload_model", ("classifier",)), JobContext()) is True
    assert sup.loaded() == {}
    # Memory that stays reserved after an unload (GPU fragmentation) replaces the worker: forced here.
    sup.config = WorkerConfig(restart_above_bytes=-1)
    sup.restart("new config")
    pid_before = sup.run(spec("put_model", "classifier", "c"), JobContext()) and sup.pid
    sup.run(JobSpec("nemo_desktop.core.app.jobs.models:unload_model", ("classifier",)), JobContext())
    assert sup.pid != pid_before and sup.loaded() == {}


def test_worker_logs_reach_the_app_log(make_supervisor):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler, root = Keep(level=logging.INFO), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        sup = make_supervisor()
        sup.run(JobSpec("worker_test_jobs:load_ballast", (1024,)), JobContext())
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert any("[model process] loaded classifier test-ballast:1024" in r.getMessage() for r in records)


@pytest.mark.parametrize("code, words", [
    (-signal.SIGSEGV, "crashed in native code (segmentation fault, SIGSEGV) while loading the classifier x"),
    (-signal.SIGABRT, "was aborted (SIGABRT)"),
    (3, "exited unexpectedly (exit status 3)"),
])
def test_exit_causes_in_words(code, words):
    err = describe_exit(code, "Models: Loading the classifier x", "Diagnosing")
    assert isinstance(err, WorkerDied) and words in err.message


def test_an_out_of_memory_kill_is_named_as_such():
    err = describe_exit(-signal.SIGKILL, "Models: Loading the image editor flux-kontext-dev", oom_killed=True)
    assert isinstance(err, OutOfMemoryError) and isinstance(err, NemoError)
    assert err.message == ("The model process was stopped by the system because the computer ran out of memory "
                           "while loading the image editor flux-kontext-dev.")
    assert "CPU offload" in err.hint and "smaller model" in err.hint


def test_in_process_mode_runs_the_same_spec_here():
    from nemo_desktop.core.app.session import ModelSession

    session = ModelSession()
    assert spec("pid").run_local(session, JobContext()) == os.getpid()
    with pytest.raises(JobCancelled):
        token = CancelToken()
        token.cancel()
        spec("steps", 3, 0).run_local(session, JobContext(cancel=token))
