"""The model worker process's main function (started by `supervisor.WorkerSupervisor`, spawn start method).

It holds a `ModelSession` (the loaded models) and runs one job at a time in its main thread; a reader thread
receives the app's messages, so a cancel request reaches the job's token while the job runs. Everything the
job reports (progress, partial results, logs, the outcome) goes back over the same pipe. When the app goes
away (the pipe closes) the worker exits at once.
"""
from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time

from nemo_desktop.core.app.worker import protocol as P

PROGRESS_INTERVAL_S = 0.05


def _set_memory_limit(limit: int | None) -> None:
    if not limit:
        return
    try:
        import resource
    except ImportError:  # Windows: no RLIMIT_AS (a job object would be needed); run without the cap
        return
    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))


class _PipeLog(logging.Handler):
    def __init__(self, send) -> None:
        super().__init__()
        self._send = send
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("nemo_desktop.core.app.worker"):
            return  # the worker's own plumbing: not for the app's log
        try:
            self._send((P.LOG, record.levelno, record.name, self.format(record)))
        except Exception:  # noqa: BLE001 - a log line that cannot be sent is dropped, never fatal
            pass


def _cuda_memory_kept() -> int:
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.memory_reserved())
    except Exception:  # noqa: BLE001
        pass
    return 0


def _restart_reason(spec: P.JobSpec, session, status: str, error: dict | None, config: P.WorkerConfig) -> str | None:
    if status == "failed" and error:
        text = f"{error.get('message', '')}\n{error.get('detail', '')}"
        if "CUDA error" in text or "device-side assert" in text or "CUBLAS_STATUS" in text:
            return "a CUDA error leaves the GPU unusable for this process"
    if spec.target == P.UNLOAD_TARGET and not session.loaded():
        from nemo_desktop.core.base.device import free_memory

        free_memory()
        kept = _cuda_memory_kept()
        if kept > config.restart_above_bytes:
            return f"{kept / 1024 ** 2:.0f} MB of GPU memory stayed reserved after the unload"
    return None


def main(conn, config: P.WorkerConfig) -> None:
    """Entry point of the child process. A failure before it is ready (a preload that does not import, a memory
    cap too small for the libraries) is sent to the app in words before the process exits, so the window can
    say why the model process cannot start."""
    try:
        _serve(conn, config)
    except BaseException as exc:  # noqa: BLE001 - the process ends either way: say why first
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        try:
            conn.send((P.START_FAILED, f"{type(exc).__name__}: {exc}"))
        except Exception:  # noqa: BLE001 - the app is gone
            pass
        raise


def _serve(conn, config: P.WorkerConfig) -> None:
    _set_memory_limit(config.memory_limit_bytes)
    import faulthandler
    import signal

    faulthandler.enable()  # a native crash leaves its Python stack on stderr (the app's log shows the cause)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal is the app's to handle
    try:
        os.nice(max(0, config.nice))
    except (OSError, AttributeError):  # AttributeError: Windows has no nice()
        pass
    for p in config.extra_sys_path:
        if p not in sys.path:
            sys.path.insert(0, p)
    import importlib

    for name in config.preload:
        importlib.import_module(name)

    send_lock = threading.Lock()

    def send(msg) -> None:
        with send_lock:
            conn.send(msg)

    root = logging.getLogger()
    root.setLevel(config.log_level)
    root.addHandler(_PipeLog(send))

    from nemo_desktop.core.base.errors import JobCancelled
    from nemo_desktop.core.base.job_context import CancelToken, JobContext, run_job
    from nemo_desktop.core.app.session import ModelSession

    session = ModelSession(config.paths)
    session.on_change = lambda: send((P.MODELS, session.loaded(), session.model_facts(), session.wanted()))
    jobs: queue.Queue = queue.Queue()
    current: dict = {}  # job_id -> CancelToken of the running job

    def read() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                os._exit(0)  # the app is gone: nothing to report to
            if msg[0] == P.CANCEL:
                token = current.get(msg[1])
                if token is not None:
                    token.cancel()
            elif msg[0] == P.RUN:
                current[msg[1]] = CancelToken()
                jobs.put(msg)
            elif msg[0] == P.STOP:
                jobs.put(None)
                return

    threading.Thread(target=read, name="nemo-worker-reader", daemon=True).start()
    send((P.READY, os.getpid(), session.loaded()))

    while True:
        msg = jobs.get()
        if msg is None:
            break
        _, job_id, spec = msg
        token = current[job_id]
        send((P.STARTED, job_id))
        last = {"t": 0.0, "stage": None}

        def on_progress(p, job_id=job_id, last=last) -> None:
            now = time.monotonic()
            final = p.total is not None and p.done >= p.total
            if p.stage != last["stage"] or final or now - last["t"] >= PROGRESS_INTERVAL_S:
                last["t"], last["stage"] = now, p.stage
                send((P.PROGRESS, job_id, p))

        def on_partial(obj, job_id=job_id) -> None:
            send((P.PARTIAL, job_id, obj))

        ctx = JobContext(on_progress=on_progress, on_partial=on_partial, cancel=token)
        if token.cancelled:
            outcome_status, result, error = "cancelled", None, JobCancelled().to_dict()
        else:
            outcome = run_job(lambda c: spec.run_local(session, c), ctx)
            outcome_status, result, error = outcome.status, outcome.result, outcome.error
        restart = _restart_reason(spec, session, outcome_status, error, config)
        current.pop(job_id, None)
        try:
            send((P.END, job_id, outcome_status, result, error, session.loaded(), restart))
        except Exception as exc:  # noqa: BLE001 - an unpicklable result: say so instead of hanging the app
            send((P.END, job_id, "failed", None,
                  {"type": type(exc).__name__, "message": f"The model process could not send the result back: {exc}",
                   "hint": "This is a bug in NEMO Desktop; switch 'Model process' to in-process to work on.",
                   "detail": repr(exc)}, session.loaded(), restart))
    session.close()
