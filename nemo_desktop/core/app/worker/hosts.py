"""Where the GUI's model jobs (`JobSpec`s) run: in the app's own process, or in the supervised model worker.

`make_model_host(session)` follows the settings (`compute.model_process`): "in-process" runs each spec on the
GPU lane's thread with the app's `ModelSession` (for debugging; the CLI always works this way), "worker" in a
`WorkerSupervisor`'s child process, whose models the session's `loaded()` then reports. Both have
`run(spec, ctx, title)`, `start()` and `stop()`.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from nemo_desktop.core.app.worker.protocol import JobSpec, WorkerConfig
from nemo_desktop.core.app.worker.supervisor import WorkerSupervisor

log = logging.getLogger(__name__)

IN_PROCESS, WORKER = "in-process", "worker"
# Modules every model worker imports at start (WorkerConfig.preload): model families registered by a plugin
# (or a test) must be known to a restarted worker before its first job.
WORKER_PRELOAD: list[str] = []


class InProcessHost:
    mode = IN_PROCESS

    def __init__(self, session) -> None:
        self.session = session

    def run(self, spec: JobSpec, ctx, title: str = "") -> Any:
        return spec.run_local(self.session, ctx)

    def start(self) -> None:
        pass

    def stop(self, timeout_s: float = 5.0) -> None:
        pass


def make_model_host(session, on_models_changed: Callable[[dict], None] | None = None, mode: str | None = None,
                    on_state_changed: Callable[[dict], None] | None = None):
    """The host the settings ask for (`mode` overrides them); a worker host becomes `session.remote`.
    `on_state_changed` hears the worker's state (WorkerSupervisor.state: restoring, dead with its cause)."""
    compute = None
    try:
        compute = session.settings().compute
    except Exception:  # noqa: BLE001 - unreadable settings: the safe default, and the window says so elsewhere
        log.exception("could not read the settings; model jobs run in the app's process")
    mode = mode or (compute.model_process if compute is not None else IN_PROCESS)
    if mode != WORKER:
        session.remote = None
        return InProcessHost(session)
    limit_gb = getattr(compute, "worker_memory_limit_gb", None)
    config = WorkerConfig(paths=session.paths, memory_limit_bytes=int(limit_gb * 1024 ** 3) if limit_gb else None,
                          preload=tuple(WORKER_PRELOAD))
    host = WorkerSupervisor(config, grace_s=float(getattr(compute, "cancel_grace_s", 10.0)),
                            on_models_changed=on_models_changed, on_state_changed=on_state_changed)
    host.mode = WORKER
    session.remote = host
    log.info("model jobs run in a separate model process (cancel grace %.0f s%s)", host.grace_s,
             f", memory cap {limit_gb:g} GB" if limit_gb else "")
    return host
