"""The app's side of the model worker process: start it, run jobs in it, cancel them, survive its death.

`WorkerSupervisor.run(spec, ctx)` is called on the GPU lane's thread (one job at a time) and behaves like
calling the job function there: progress and partial results arrive through `ctx`, the result is returned,
a failure raises a `NemoError` with the worker's message, hint and traceback, a cancel raises `JobCancelled`.
What a thread cannot do, it can:

- the worker dies (any signal, the out-of-memory killer, a native crash, `os._exit`): the job fails with a
  message that names the cause in words and what it was doing ("... was stopped by the system because the
  computer ran out of memory while loading the image editor flux-kontext-dev"), a new worker is started at
  once, and it loads exactly the models its predecessor held (same ref, options and revision, remembered from
  the worker's `ModelSession.wanted()`) before the next job runs (at once when it died idle). A model it cannot
  load again is never replaced by another: the job that needs it fails naming it;
- a worker that keeps dying at start (or within `stable_start_s` of it) is restarted at most `restart_limit`
  times in a row (jupyter_client's KernelRestarter: restart_limit, stable_start_time); then the supervisor is
  "dead": jobs fail with the cause in words until `revive()` (the window's "Start the model process again");
- Cancel asks the job to stop at its next check; when it has not stopped after `grace_s` (one native call,
  a model load, one `generate`), the worker is killed and replaced and the job reported cancelled;
- a CUDA error (the process's GPU context is unusable until it exits) or GPU memory an unload could not return
  makes the worker be replaced after the job ends.

`loaded()` is the worker's models as it last reported them ({} once it died): the window's model list.
"""
from __future__ import annotations

import atexit
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.util  # its exit handler (terminating daemon children) is registered before _exiting
import signal
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable

from nemo_desktop.core.base.errors import JobCancelled, NemoError, OutOfMemoryError

from nemo_desktop.core.app.worker import protocol as P
from nemo_desktop.core.app.worker.child import main as child_main

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 10.0
POLL_S = 0.05

DEFAULT_RESTART_LIMIT = 5  # quick deaths in a row before giving up (jupyter_client's restart_limit)
DEFAULT_STABLE_START_S = 10.0  # a worker that lived this long after it was ready was a good start

RESTORE_TARGET = "nemo_desktop.core.app.jobs.models:restore_loaded"
RUNNING, RESTORING, DEAD, STOPPED = "running", "restoring", "dead", "stopped"

MEMORY_HINT = ("Try CPU offload (Model manager > Settings), a smaller model, or closing other programs. A new "
               "model process has been started: it loads the same models again before the next job.")
CRASH_HINT = ("A new model process has been started: it loads the same models again before the next job, so you "
              "can run the job again. If it happens again, the log (Help > Open log folder) has the details; "
              "setting 'Model process' to in-process shows the error where it happens.")
DEAD_HINT = ("Fix the cause (the log, Help > Open log folder, has the details), then choose 'Start the model "
             "process again' (status bar); setting 'Model process' to in-process shows the error where it happens.")


class WorkerDied(NemoError):
    """The model worker process ended while it ran a job."""


class WorkerGaveUp(WorkerDied):
    """The model worker kept dying at start: it is not started again until the user asks (`revive`)."""


class RemoteJobError(NemoError):
    """A job failed in the worker: its own error dict (type, message, hint, traceback) as the worker said it."""

    def __init__(self, error: dict):
        super().__init__(error.get("message") or "The job failed in the model process.", hint=error.get("hint"),
                         detail=error.get("detail"))
        self.remote_type = error.get("type") or "Error"

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["type"] = self.remote_type
        return d


def _cgroup_oom_kills() -> int | None:
    """The kernel's count of out-of-memory kills in this process's cgroup (v2), None when unreadable."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                events = Path("/sys/fs/cgroup") / line[3:].lstrip("/") / "memory.events"
                for ev in events.read_text().splitlines():
                    key, _, value = ev.partition(" ")
                    if key == "oom_kill":
                        return int(value)
    except (OSError, ValueError):
        return None
    return None


# At interpreter exit multiprocessing terminates daemon children (SIGTERM): that is no death to report or repair.
_LIVE: "weakref.WeakSet[WorkerSupervisor]" = weakref.WeakSet()


@atexit.register  # registered after multiprocessing's own exit handler, so it runs before it
def _exiting() -> None:
    for sup in list(_LIVE):
        sup._stopping = True


_IDLE = "\0idle"  # describe_exit's title for a worker that died between jobs


def _doing(stage: str | None, title: str) -> str:
    """'loading the image editor x' from the job's last progress stage ('Models: Loading the image editor x')."""
    if title == _IDLE:
        return "idle"
    if stage:
        last = stage.rsplit(": ", 1)[-1].strip()
        if last:
            # "Loading x" reads "loading x" mid-sentence; a name as written ("LGD", "Grad-CAM", "CLIP scoring")
            # stays as it is: only an ordinary capitalised word is lowered.
            first = last.split()[0]
            return last[0].lower() + last[1:] if first.isalpha() and first[1:].islower() else last
    return f"running '{title}'" if title else "running a job"


def describe_exit(exitcode: int | None, stage: str | None, title: str = "",
                  oom_killed: bool = False) -> NemoError:
    """The error a job reports when the worker process ended under it, its cause in words."""
    doing = _doing(stage, title)
    loading = doing.startswith("loading")
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        if -exitcode == signal.SIGKILL:
            if oom_killed:
                return OutOfMemoryError(f"The model process was stopped by the system because the computer ran "
                                        f"out of memory while {doing}.", hint=MEMORY_HINT,
                                        detail=f"exit: {name}; the cgroup's oom_kill count went up")
            return WorkerDied(f"The model process was killed (SIGKILL) while {doing}: the system stops a process "
                              f"this way when the computer runs out of memory{' (likely during a load)' if loading else ''}"
                              ", or another program stopped it.", hint=MEMORY_HINT, detail=f"exit: {name}")
        cause = {
            signal.SIGSEGV: "crashed in native code (segmentation fault, SIGSEGV)",
            signal.SIGABRT: "was aborted (SIGABRT) by a native library, often after a CUDA error",
            signal.SIGBUS: "crashed in native code (bus error, SIGBUS)",
            signal.SIGFPE: "crashed in native code (arithmetic error, SIGFPE)",
            signal.SIGILL: "crashed in native code (illegal instruction, SIGILL)",
            signal.SIGTERM: "was terminated (SIGTERM) by another program",
        }.get(-exitcode, f"was stopped by {name}")
        return WorkerDied(f"The model process {cause} while {doing}.", hint=CRASH_HINT, detail=f"exit: {name}")
    if exitcode is None:
        return WorkerDied(f"The model process stopped answering while {doing}.", hint=CRASH_HINT)
    return WorkerDied(f"The model process exited unexpectedly (exit status {exitcode}) while {doing}.",
                      hint=CRASH_HINT, detail=f"exit status {exitcode}")


class WorkerSupervisor:
    """Owns one model worker process at a time; thread-safe, one job at a time."""

    def __init__(self, config: P.WorkerConfig | None = None, grace_s: float = DEFAULT_GRACE_S,
                 on_models_changed: Callable[[dict], None] | None = None,
                 start_timeout_s: float = 120.0, restart_limit: int = DEFAULT_RESTART_LIMIT,
                 stable_start_s: float = DEFAULT_STABLE_START_S,
                 on_state_changed: Callable[[dict], None] | None = None):
        self.config = config or P.WorkerConfig()
        self.grace_s = grace_s
        self.start_timeout_s = start_timeout_s
        self.restart_limit = restart_limit
        self.stable_start_s = stable_start_s
        self.on_models_changed = on_models_changed
        self.on_state_changed = on_state_changed
        self._mp = multiprocessing.get_context("spawn")
        self._lock = threading.RLock()
        self._proc = None
        self._conn = None
        self._ready = False
        self._started_at = 0.0
        self._models: dict[str, str] = {}
        self._facts: dict[str, dict] = {}
        self._ids = itertools.count(1)
        self.restarts = 0
        self.last_exit: NemoError | None = None
        self._stopping = False
        # What the user had loaded ({kind: record}, the worker's ModelSession.wanted()): kept across processes.
        self._wanted: dict[str, dict] = {}
        self._restore_due = False
        self.restore_failed: list = []  # (kind, ref, reason) the last restore could not load again
        self._stable_from: float | None = None  # when the worker was ready with its models (None: not yet)
        self._quick_deaths = 0
        self.dead: WorkerGaveUp | None = None
        self._status = STOPPED
        _LIVE.add(self)

    # -- state ------------------------------------------------------------------------------------------
    def loaded(self) -> dict[str, str]:
        return dict(self._models)

    def facts(self) -> dict[str, dict]:
        """{kind: {"model_id", "zero_shot"}} of the worker's models (ModelSession.facts)."""
        return dict(self._facts)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def wanted(self) -> dict[str, str]:
        """{kind: ref} of the models the user has loaded, in memory or to be restored in a new process."""
        return {kind: r["ref"] for kind, r in self._wanted.items()}

    def state(self) -> dict:
        """What the window shows: {"status": running | restoring | dead | stopped, "cause" (words, when dead or
        after the last death), "hint", "restarts", "wanted" {kind: ref}, "unrestored" [(kind, ref, reason)]}."""
        cause = self.dead or self.last_exit
        return {"status": self._status, "cause": cause.message if cause is not None else None,
                "hint": self.dead.hint if self.dead is not None else None, "restarts": self.restarts,
                "wanted": self.wanted(), "unrestored": list(self.restore_failed)}

    def _set_status(self, status: str) -> None:
        self._status = status
        if self.on_state_changed is not None:
            try:
                self.on_state_changed(self.state())
            except Exception:  # noqa: BLE001 - a listener's bug must not fail the job
                log.exception("on_state_changed failed")

    def _set_models(self, models: dict) -> None:
        if self.restore_failed and any(u[0] in models for u in self.restore_failed):
            self.restore_failed = [u for u in self.restore_failed if u[0] not in models]  # loaded again since
            self._set_status(self._status)
        if models != self._models:
            self._models = dict(models)
            if self.on_models_changed is not None:
                try:
                    self.on_models_changed(dict(models))
                except Exception:  # noqa: BLE001 - a listener's bug must not fail the job
                    log.exception("on_models_changed failed")

    # -- life cycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker (returns at once; the first job waits until it is ready). Never waits for a running
        job (the GUI thread calls it): a job that holds the lock has a worker already."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._proc is not None and self._proc.is_alive():
                return
            if self.dead is not None:  # gave up: only the user starts it again (revive)
                return
            parent_conn, child_conn = self._mp.Pipe(duplex=True)
            proc = self._mp.Process(target=child_main, args=(child_conn, self.config), name="nemo-model-worker",
                                    daemon=True)
            proc.start()
            child_conn.close()
            self._proc, self._conn, self._ready = proc, parent_conn, False
            self._started_at = time.monotonic()
            self._stable_from = None if self._restore_due else self._started_at
            self._stopping = False
            log.info("model process started (pid %d)", proc.pid)
            threading.Thread(target=self._watch, args=(proc,), name="nemo-worker-watch", daemon=True).start()
            self._set_status(RUNNING)  # RESTORING while the models are loaded again (_restore)
        finally:
            self._lock.release()

    def revive(self) -> None:
        """Start the worker again after it was given up (the window's "Start the model process again")."""
        with self._lock:
            self.dead = None
            self._quick_deaths = 0
            self._stopping = False
            self.start()
        self._restore_soon()

    def _after_death(self, err: NemoError) -> None:
        """Count a worker's unplanned death and start the next one, or give up after `restart_limit` quick deaths
        in a row (a worker that was ready with its models for `stable_start_s` resets the count). Lock held."""
        self.last_exit = err
        self.restarts += 1
        now = time.monotonic()
        if self._stable_from is not None and now - self._stable_from >= self.stable_start_s:
            self._quick_deaths = 0
        self._quick_deaths += 1
        if self._stopping:
            return
        if self._quick_deaths > self.restart_limit:
            self.dead = WorkerGaveUp(
                f"The model process is stopped: it ended {self._quick_deaths} times in a row within "
                f"{self.stable_start_s:g} s of starting, so it is not started again by itself. Last: {err.message}",
                hint=DEAD_HINT, detail=err.detail)
            log.error("%s", self.dead.message)
            self._set_status(DEAD)
            return
        self.start()

    def _restore_soon(self) -> None:
        """After a worker died idle: load its predecessor's models now, so the lists show them again at once (a
        job that comes first restores them itself, before it runs)."""
        if self._restore_due:
            threading.Thread(target=self._restore_in_background, name="nemo-worker-restore", daemon=True).start()

    def _restore_in_background(self) -> None:
        from nemo_desktop.core.base.job_context import JobContext

        with self._lock:
            if not self._restore_due or self.dead is not None or self._stopping or not self.alive:
                return
            try:
                self._restore(JobContext())
            except NemoError as exc:  # the next job restores (or reports) again
                log.error("could not restore the models in the new model process: %s", exc.message)

    def _restore(self, ctx) -> None:
        """Load the remembered models in the new worker (lock held); raises when the worker dies meanwhile."""
        records = {kind: dict(r) for kind, r in self._wanted.items()}
        log.info("restoring the models of the last model process: %s",
                 ", ".join(f"{k} {r['ref']}" for k, r in records.items()))
        self._set_status(RESTORING)
        out = self._exchange(P.JobSpec(RESTORE_TARGET, (records,)),
                             ctx.sub("Loading the models again after the model process restarted", 0.0, 0.0),
                             "restoring the models")
        self._restore_due = False
        self._stable_from = time.monotonic()
        self.restore_failed = list(out.get("failed", []))
        self._set_status(RUNNING)

    def _watch(self, proc) -> None:
        """A worker that dies between jobs: its models are gone (the lists must say so now) and a new one starts.
        While a job runs, `run` notices the death itself and fails the job with its cause."""
        multiprocessing.connection.wait([proc.sentinel])
        if not self._lock.acquire(blocking=False):
            return  # a job is running (run() reports the death) or the worker is being replaced
        try:
            if self._proc is not proc or self._stopping:
                return
            proc.join(1)
            err = self._exit_error(proc, None, _IDLE)
            log.error("the model process ended while idle (exit code %s): %s", proc.exitcode, err.message)
            self._discard(kill=True)
            self._after_death(err)
        finally:
            self._lock.release()
        self._restore_soon()

    def _exit_error(self, proc, stage: str | None, title: str, oom_killed: bool = False) -> NemoError:
        """Why the worker ended: its own words when it could not start, else its exit in words."""
        conn = self._conn
        try:
            while conn is not None and conn.poll(0):
                msg = conn.recv()
                if msg and msg[0] == P.START_FAILED:
                    return WorkerDied(f"The model process could not start: {msg[1]}", hint=DEAD_HINT,
                                      detail=f"exit code {proc.exitcode}")
        except Exception:  # noqa: BLE001 - a pipe cut mid-message: the exit code says what is known
            pass
        return describe_exit(proc.exitcode, stage, title, oom_killed=oom_killed)

    def _discard(self, kill: bool) -> None:
        proc, conn = self._proc, self._conn
        self._proc, self._conn, self._ready = None, None, False
        self._restore_due = bool(self._wanted)  # the next process loads them again before its first job
        if proc is not None:
            if kill and proc.is_alive():
                proc.kill()
            proc.join(5)
        if conn is not None:
            conn.close()
        self._facts = {}
        self._set_models({})

    def restart(self, reason: str) -> None:
        """Replace the worker (its models are gone; the next job loads what it needs)."""
        with self._lock:
            log.warning("restarting the model process: %s", reason)
            self._discard(kill=True)
            self.restarts += 1
            if not self._stopping:
                self.start()
        self._restore_soon()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the worker to exit (it releases its models), kill it if it does not in time."""
        self._stopping = True
        self.on_models_changed = None  # the app is closing: nothing to tell it
        self.on_state_changed = None
        if not self._lock.acquire(timeout=timeout_s):
            proc = self._proc  # a job is still running: do not wait for it
            if proc is not None and proc.is_alive():
                proc.kill()
            return
        try:
            proc, conn = self._proc, self._conn
            if proc is None:
                return
            try:
                conn.send((P.STOP,))
            except (OSError, ValueError):
                pass
            proc.join(timeout_s)
            self._discard(kill=True)
            self._status = STOPPED
        finally:
            self._lock.release()

    # -- running jobs -------------------------------------------------------------------------------------
    def run(self, spec: P.JobSpec, ctx, title: str = "") -> Any:
        """Run `spec` in the worker, reporting through `ctx`; returns its result or raises (see module doc)."""
        with self._lock:
            if self.dead is None and self._proc is not None and not self._proc.is_alive():
                proc = self._proc  # died idle, before its watcher acted
                proc.join(1)
                err = self._exit_error(proc, None, _IDLE)
                log.error("the model process had ended while idle (exit code %s): %s", proc.exitcode, err.message)
                self._discard(kill=True)
                self._after_death(err)
            if self.dead is not None:
                raise WorkerGaveUp(self.dead.message, hint=self.dead.hint, detail=self.dead.detail)
            self.start()
            if self._restore_due:  # a new process: exactly the models the last one held, before this job
                self._restore(ctx)
            return self._exchange(spec, ctx, title)

    def _exchange(self, spec: P.JobSpec, ctx, title: str) -> Any:
        """Send `spec` to the (started) worker and follow it to its end (lock held)."""
        job_id = next(self._ids)
        oom_before = _cgroup_oom_kills()
        state = {"stage": None, "cancel_at": None}
        try:
            self._conn.send((P.RUN, job_id, spec))
        except (OSError, ValueError, EOFError):
            self._died(state, title, oom_before)
        except Exception as exc:  # noqa: BLE001 - an argument that cannot be pickled
            raise NemoError(f"This job cannot be sent to the model process: {exc}",
                            hint="This is a bug in NEMO Desktop; set 'Model process' to in-process to "
                                 "work on.", detail=repr(exc)) from exc
        while True:
            if ctx.cancelled and state["cancel_at"] is None:
                state["cancel_at"] = time.monotonic()
                try:
                    self._conn.send((P.CANCEL, job_id))
                except (OSError, ValueError):
                    pass
            if state["cancel_at"] is not None and time.monotonic() - state["cancel_at"] > self.grace_s:
                doing = _doing(state["stage"], title)
                self.restart(f"the job did not stop within {self.grace_s:g} s of Cancel")
                raise JobCancelled(f"Cancelled: the job did not stop by itself within {self.grace_s:g} s "
                                   f"(it was {doing}), so the model process was restarted. Finished steps "
                                   "are stored; the same models are loaded again before the next job.")
            try:
                if not self._conn.poll(POLL_S):
                    if not self._proc.is_alive() and not self._conn.poll(0):
                        self._died(state, title, oom_before)
                    if not self._ready and time.monotonic() - self._started_at > self.start_timeout_s:
                        self.restart("it did not start in time")
                        raise WorkerDied(f"The model process did not start within {self.start_timeout_s:g} "
                                         "s.", hint=CRASH_HINT)
                    continue
                msg = self._conn.recv()
            except (EOFError, OSError):
                self._died(state, title, oom_before)
            except Exception as exc:  # noqa: BLE001 - a message that cannot be unpickled here
                self.restart(f"a message of the model process could not be read: {exc!r}")
                raise NemoError("The model process sent something this window cannot read; the job was "
                                "stopped and the model process restarted.", hint=CRASH_HINT,
                                detail=repr(exc)) from exc
            kind = msg[0]
            if kind == P.READY:
                self._ready = True
                self._set_models(msg[2])
            elif kind == P.START_FAILED:
                state["start_failed"] = msg[1]
            elif kind == P.LOG:
                logging.getLogger(msg[2]).log(msg[1], "[model process] %s", msg[3])
            elif kind == P.MODELS:
                self._facts = dict(msg[2])
                if len(msg) > 3:
                    self._wanted = dict(msg[3])
                self._set_models(msg[1])
            elif kind == P.STARTED:
                pass
            elif kind == P.PROGRESS and msg[1] == job_id:
                state["stage"] = msg[2].stage
                ctx.report(msg[2])
            elif kind == P.PARTIAL and msg[1] == job_id:
                ctx.partial(msg[2])
            elif kind == P.END and msg[1] == job_id:
                _, _, status, result, error, models, restart = msg
                self._set_models(models)
                if restart:
                    self.restart(restart)
                if status == "done":
                    return result
                if status == "cancelled":
                    raise JobCancelled((error or {}).get("message") or "Cancelled by the user.")
                err = RemoteJobError(error or {})
                if restart and "CUDA" in restart:
                    err.hint = ((err.hint + " ") if err.hint else "") + (
                        "The model process was restarted, since a CUDA error leaves the GPU unusable for "
                        "it; the same models are loaded again before the next job.")
                raise err

    def _died(self, state: dict, title: str, oom_before: int | None) -> None:
        proc = self._proc
        proc.join(5)
        exitcode = proc.exitcode
        oom_after = _cgroup_oom_kills()
        oom = oom_before is not None and oom_after is not None and oom_after > oom_before
        if state.get("start_failed"):
            err = WorkerDied(f"The model process could not start: {state['start_failed']}", hint=DEAD_HINT,
                             detail=f"exit code {exitcode}")
        else:
            err = self._exit_error(proc, state["stage"], title, oom_killed=oom)
        log.error("%s (pid %s, exit code %s)", err.message, proc.pid, exitcode)
        self._discard(kill=True)
        self._after_death(err)  # a new worker at once (it restores the models before the next job), or gives up
        if state["cancel_at"] is not None:
            raise JobCancelled(f"Cancelled. {err.message}")
        raise err
