"""What the app and the model worker process say to each other over their pipe (Qt-free).

A job is described by a picklable `JobSpec` (the import path of a job function plus its arguments), never by
a closure: the same spec runs in the app's own process (`run_local`, the in-process mode and the CLI) or in
the worker process (`supervisor.WorkerSupervisor.run`). A job function takes the `ModelSession` that holds the
models first and the `JobContext` as keyword `ctx`: `fn(session, *args, ctx=ctx, **kwargs)`.

Messages are tuples whose first item names them:

  app -> worker   ("run", job_id, JobSpec)        run one job (one at a time)
                  ("cancel", job_id)              ask the running job to stop at its next check
                  ("stop",)                       finish and exit
  worker -> app   ("ready", pid, models)          started; `models` is {kind: ref} of the models in memory
                  ("started", job_id)
                  ("progress", job_id, Progress)  throttled like the GUI's lane (about 20 a second)
                  ("partial", job_id, object)     what the job passed to ctx.partial()
                  ("log", levelno, logger, text)  a log record of the worker, re-logged in the app
                  ("models", models, facts, wanted)
                                                  after every load and unload, as it happens; `facts` is
                                                  {kind: {"model_id", "zero_shot"}} (ModelSession.facts);
                                                  `wanted` how each was loaded (ModelSession.wanted), which
                                                  the app keeps to restore them in a new process
                  ("start-failed", text)          the process could not start (then it exits)
                  ("end", job_id, status, result, error, models, restart)
                                                  status done | cancelled | failed; `error` is the
                                                  describe_exception dict; `restart` a reason (words) when the
                                                  worker should be replaced (a CUDA error, memory an unload
                                                  could not return), else None
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

RUN, CANCEL, STOP = "run", "cancel", "stop"
READY, STARTED, PROGRESS, PARTIAL, LOG, END = "ready", "started", "progress", "partial", "log", "end"
MODELS, START_FAILED = "models", "start-failed"

# Job functions whose end changes which models are in memory (the others may load defaults too: the worker
# reports its models after every job anyway).
UNLOAD_TARGET = "nemo_desktop.core.app.jobs.models:unload_model"


@dataclass(frozen=True)
class JobSpec:
    """A job as data: `target` is "package.module:function"; args and kwargs must be picklable."""

    target: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def resolve(self) -> Callable[..., Any]:
        module, _, name = self.target.partition(":")
        if not module or not name:
            raise ValueError(f"JobSpec target must be 'module:function', not {self.target!r}")
        return getattr(importlib.import_module(module), name)

    def run_local(self, session, ctx) -> Any:
        """Run in this process with `session`'s models (in-process mode, the CLI, the worker itself)."""
        return self.resolve()(session, *self.args, ctx=ctx, **self.kwargs)

    @property
    def name(self) -> str:
        return self.target.rpartition(":")[2]


@dataclass(frozen=True)
class WorkerConfig:
    """How the worker process is set up (picklable: it travels to the spawned child)."""

    paths: Any = None  # AppPaths of the app (None: get_paths() in the child, from the same environment)
    # An address-space cap (RLIMIT_AS) set in the child before it imports anything: loads that exceed it fail
    # there with MemoryError instead of waking the system's out-of-memory killer. None: no cap.
    memory_limit_bytes: int | None = None
    # The worker runs at normal priority: being another process it holds no GIL against the window, and at nice 10
    # its jobs starved behind other programs (gui_event_loop.py --busy 2: a diagnosis took 631 s instead of 99 s,
    # with the window's stalls no better: 1.13-1.38 x idle at nice 10, 1.15-1.17 x at 0).
    nice: int = 0
    # After an unload leaves no model in memory, GPU memory still held by the caching allocator beyond this
    # (fragmentation) makes the worker ask to be replaced, which is the only sure way to return it.
    restart_above_bytes: int = 512 * 1024 ** 2
    log_level: int = 20  # logging.INFO
    extra_sys_path: tuple[str, ...] = ()
    # Modules the worker imports as it starts (model families that register themselves, a plugin's adapters),
    # so that a restarted worker knows them before its first job.
    preload: tuple[str, ...] = ()
