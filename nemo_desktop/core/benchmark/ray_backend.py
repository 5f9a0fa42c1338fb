"""`nemo bench run CONFIG --ray [ADDRESS]`: the run's shards as Ray actors, merged into the run's store.

    summary = RayBenchmark(config, store, address="ray://head:10001", ctx=ctx).run()

Before anything starts (no cluster is joined, no actor, no folder written), the whole config is checked on
the driver (preflight.check_config: datasets, ImageNet subset, model references, methods and their options,
criteria): a wrong dataset root fails in a second, not after every actor has started.

The run is cut into n shards (`--shard i/n` semantics, work_units.Shard): n = the `workers` asked for, else
one per GPU of the cluster, else, on a CPU-only cluster, one per `CPUS_PER_SHARD` (8) CPUs, at least one
(every shard loads its own copy of every model, and torch uses several cores per model). Each shard is one
Ray actor (one GPU each when the cluster has GPUs, so Ray sets its CUDA_VISIBLE_DEVICES; its share of the
CPUs, at most CPUS_PER_SHARD, otherwise) that loads its model set once (ModelPool) and runs the ordinary
BenchmarkRunner into its own shard store, `<store>/bench/ray-shards/<run id>/shard-i-of-n/`.
When every shard has returned, the shard stores are merged into the run's store with `nemo bench merge`'s
merge_stores (also after a cancel, so finished items are never only in a shard store).

Progress: the driver polls each actor (threaded actors answer while they run) and reports the sum of the
shards' items done, with the rate and ETA of the computed items. Cancel (Ctrl-C, or the job's cancel token):
every actor's cancel token is set, so its runner stops between items and records its status; actors that
do not return within `cancel_grace_s` are killed. Nothing finished is lost either way: items are written
one by one, atomically, into the shard stores.

Resume: the shard count is written to `plan.json` beside the shard stores once work has started (a shard is
computing its items) and reused by every later launch of the same run, so a re-run after a killed driver finds
each shard's finished items in its own store and computes only the rest (the per-item keys make a second
computation of a finished item impossible). A launch that failed before any shard started its items fixes
nothing: the next launch chooses its count afresh. A worker that dies mid-run (node lost, OOM-killed) is
replaced by a new actor on the same shard store, up to `max_restarts` times per shard; the item that was in
flight is finished from the units its method had stored.

Plug-ins: model families and methods from installed distributions (entry-point groups
`nemo_desktop.model_families` and `nemo_desktop.analyses`, core/base/plugins.py) are loaded by the registries in the
driver and in every worker process alike, with no set-up hook: install the plugin distribution wherever a worker
runs (or ship it with the job's runtime_env). Only something registered by hand at run time (outside any entry
point) still needs `runtime_env={"worker_process_setup_hook": "my_module.register"}`.

Cluster: workers must see the run's store folder at the same path (one machine, or a shared filesystem such
as NFS on every node): the driver writes a token into launch.json and every worker checks it, so a worker on
a node without the shared folder fails with a clear error instead of writing results nobody merges.
"""
from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError, JobCancelled
from ..base.job_context import JobContext, null_context
from .config import BenchConfig
from .merge import merge_stores
from .runner import PROGRESS_STAGE
from .work_units import RunSummary, Shard, _duration

log = logging.getLogger(__name__)
PLAN_FILE = "plan.json"  # the run's shard count, written once work has started
LAUNCH_FILE = "launch.json"  # this launch's token, which every worker checks (it sees the shared folder)
CPUS_PER_SHARD = 8  # a CPU-only cluster: one shard per this many CPUs by default


def shards_folder(store_dir: str | os.PathLike, run_id: str) -> Path:
    return Path(store_dir) / "bench" / "ray-shards" / run_id


def shard_store_dir(store_dir: str | os.PathLike, run_id: str, shard: Shard) -> Path:
    return shards_folder(store_dir, run_id) / f"shard-{shard.index + 1}-of-{shard.count}"


def default_shards(gpus: int, cpus: int) -> int:
    """Shards when --ray-workers is not given: one per GPU, else one per CPUS_PER_SHARD CPUs (at least one)."""
    return gpus if gpus else max(1, cpus // CPUS_PER_SHARD)


def cpu_share(cpus: int, shards: int) -> int:
    """CPUs each actor of a CPU-only cluster asks for: its share of the cluster, at most CPUS_PER_SHARD."""
    return max(1, min(CPUS_PER_SHARD, cpus // max(1, shards)))


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("`--ray` needs Ray, which is not installed.",
                          hint='Install the extra: pip install "nemo-desktop[ray]" (or pip install ray).') from None
    return ray


def placement() -> dict[str, Any]:
    """Where this actor runs: its node and the GPUs Ray gave it (CUDA_VISIBLE_DEVICES is set by Ray from its
    `num_gpus=1` request, so torch in this process sees exactly that one device as cuda:0)."""
    import ray

    return {"node": ray.util.get_node_ip_address(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


class ShardWorker:
    """One shard of the run in one Ray actor (threaded: `progress` and `cancel` answer while `run` works)."""

    def __init__(self) -> None:
        from ..base.job_context import CancelToken

        self.token = CancelToken()
        self.last: tuple[str, int, int | None, str] | None = None

    def pid(self) -> int:
        return os.getpid()

    def progress(self) -> tuple[str, int, int | None, str] | None:
        return self.last

    def cancel(self) -> None:
        self.token.cancel()

    def run(self, config: BenchConfig, folder: str, plan_token: str, shard: tuple[int, int], run_id: str,
            retry_failed: bool) -> dict[str, Any]:
        from ..store import ResultsStore
        from .runner import BenchmarkRunner

        launch = Path(folder) / LAUNCH_FILE
        if not launch.is_file() or json.loads(launch.read_text(encoding="utf-8")).get("token") != plan_token:
            raise ConfigError(f"This Ray worker does not see the run's store folder {folder}.",
                              hint="Put the results store on a filesystem every node mounts at the same path "
                                   "(e.g. NFS), or run on one machine.")
        where = shard_store_dir(Path(folder).parents[2], run_id, Shard(*shard))
        store = ResultsStore.open(db_path=where / "results.sqlite", artifacts_dir=where / "artifacts")
        ctx = JobContext(lambda p: setattr(self, "last", (p.stage, p.done, p.total, p.message)), cancel=self.token)
        try:
            runner = BenchmarkRunner(config, store, shard=Shard(*shard), ctx=ctx, retry_failed=retry_failed,
                                     run_id=run_id)
            try:
                summary = runner.run()
            except JobCancelled:
                summary = runner.summary
            return {**summary.to_dict(), "placement": placement()}
        finally:
            store.close()


@dataclass
class ShardState:
    shard: Shard
    actor: Any = None
    ref: Any = None
    pid: int | None = None
    attempts: int = 0
    summary: dict[str, Any] | None = None
    error: str | None = None
    progress: tuple[str, int, int | None, str] | None = None
    started: float = field(default_factory=time.perf_counter)


class RayBenchmark:
    def __init__(self, config: BenchConfig, store: Any, *, address: str | None = None, workers: int | None = None,
                 ctx: JobContext | None = None, retry_failed: bool = False, run_id: str | None = None,
                 max_restarts: int = 2, poll_s: float = 0.5,
                 cancel_grace_s: float = 30.0, init_options: dict[str, Any] | None = None) -> None:
        if workers is not None and workers < 1:
            raise ConfigError(f"--ray-workers must be at least 1, not {workers}.")
        self.config, self.store, self.address, self.workers = config, store, address, workers
        self.ctx = ctx or null_context()
        self.retry_failed = retry_failed
        self.run_id = run_id or config.run_id
        self.max_restarts, self.poll_s, self.cancel_grace_s = max_restarts, poll_s, cancel_grace_s
        self.init_options = dict(init_options or {})
        self.shards: list[ShardState] = []
        self.folder = shards_folder(store.store_dir, self.run_id)
        self.planned = False  # plan.json written (work started in this launch or an earlier one)

    # ------------------------------------------------------------------------------------------- run
    def run(self) -> RunSummary:
        from .preflight import check_config

        ray = import_ray()
        t0 = time.perf_counter()
        self.ctx.progress("Checking the config", 0, None)
        check_config(self.config)  # before the cluster, the actors and any file: a wrong root fails now
        if not ray.is_initialized():
            self.ctx.progress("Connecting to Ray", 0, None, self.address or "local")
            ray.init(address=self.address, **self.init_options)
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        cpus = int(resources.get("CPU", 1)) or 1
        count = self._plan(default_shards(gpus, cpus))
        token = self._launch()
        per_actor = {"num_gpus": 1} if gpus else {"num_cpus": cpu_share(cpus, count)}
        actor_cls = ray.remote(max_concurrency=3, **per_actor)(ShardWorker)
        self.shards = [ShardState(Shard(i, count)) for i in range(count)]
        cancelled = False
        try:
            for st in self.shards:
                self._start(ray, actor_cls, st, token)
            self._wait(ray, actor_cls, token)
        except (JobCancelled, KeyboardInterrupt):
            cancelled = True
            self._cancel(ray)
        finally:
            for st in self.shards:
                if st.actor is not None:
                    ray.kill(st.actor)
        summary = self._merge(time.perf_counter() - t0, cancelled)
        if cancelled:
            raise JobCancelled()
        failed = [st for st in self.shards if st.summary is None]
        if failed:
            summary.notes.extend(f"shard {st.shard}: {st.error}" for st in failed)
        return summary

    def _plan(self, default: int) -> int:
        """The shard count: the one of an earlier launch of this run that started work (resume), else the
        workers asked for, else `default`. Nothing is written here (see _record_plan)."""
        plan = self.folder / PLAN_FILE
        old = json.loads(plan.read_text(encoding="utf-8")) if plan.is_file() else {}
        started = int(old.get("shards") or 0) or self._started_count()
        count = int(started or self.workers or default)
        if started and self.workers and self.workers != count:
            log.warning("run %s was started with %d Ray workers; resuming with the same %d shards (the "
                        "finished items are in their shard stores)", self.run_id, count, count)
        self.planned = bool(old)
        return count

    def _started_count(self) -> int | None:
        """The shard count of shard stores that hold items of this run (a driver killed before plan.json)."""
        from ..store import ResultsStore

        for where in sorted(self.folder.glob("shard-*-of-*")) if self.folder.is_dir() else []:
            db = where / "results.sqlite"
            if not db.is_file():
                continue
            store = ResultsStore.open(db_path=db, artifacts_dir=where / "artifacts")
            try:
                if store.run_items(self.run_id):
                    return int(where.name.rsplit("-", 1)[1])
            finally:
                store.close()
        return None

    def _launch(self) -> str:
        """This launch's token in launch.json, for the workers' shared-folder check."""
        from ..store import atomic_write_text

        token = uuid.uuid4().hex
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / LAUNCH_FILE, json.dumps({"run_id": self.run_id, "token": token}))
        return token

    def _record_plan(self) -> None:
        """plan.json, once a shard computes its items: from then on every launch of the run keeps this count."""
        if self.planned or not self.shards:
            return
        from ..store import atomic_write_text

        atomic_write_text(self.folder / PLAN_FILE, json.dumps({"run_id": self.run_id, "shards": len(self.shards),
                                                               "config_sha256": self.config.sha256}))
        self.planned = True

    def _start(self, ray: Any, actor_cls: Any, st: ShardState, token: str) -> None:
        st.attempts += 1
        st.actor = actor_cls.remote()
        st.pid = None
        st.ref = st.actor.run.remote(self.config, str(self.folder), token, (st.shard.index, st.shard.count),
                                     self.run_id, self.retry_failed)

    def _wait(self, ray: Any, actor_cls: Any, token: str) -> None:
        while True:
            pending = {st.ref: st for st in self.shards if st.ref is not None}
            if not pending:
                return
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=self.poll_s)
            for ref in ready:
                st = pending[ref]
                st.ref = None
                try:
                    st.summary = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as exc:
                    self._lost(ray, actor_cls, st, token, exc)
                except ray.exceptions.RayTaskError as exc:  # the runner raised: a configuration error, ...
                    cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
                    if isinstance(cause, ConfigError):
                        raise cause from None
                    st.error = f"{type(cause).__name__}: {cause}"
            self._poll_progress(ray)
            self.ctx.check_cancelled()

    def _lost(self, ray: Any, actor_cls: Any, st: ShardState, token: str, exc: BaseException) -> None:
        if st.attempts > self.max_restarts:
            st.error = f"its worker died {st.attempts} times ({type(exc).__name__}); run again to resume"
            log.error("shard %s: %s", st.shard, st.error)
            return
        log.warning("shard %s: its Ray worker died (%s); starting another on the same shard store", st.shard,
                    type(exc).__name__)
        try:
            ray.kill(st.actor)
        except Exception:  # noqa: BLE001 - it is gone already
            log.debug("shard %s: the dead worker could not be killed", st.shard, exc_info=True)
        self._start(ray, actor_cls, st, token)

    def _poll_progress(self, ray: Any) -> None:
        live = [st for st in self.shards if st.ref is not None]
        refs = [st.actor.progress.remote() for st in live]
        try:
            got = ray.get(refs, timeout=max(self.poll_s, 1.0))
        except Exception:  # noqa: BLE001 - a dying actor: its run() result says what happened
            got = [st.progress for st in live]
        for st, p in zip(live, got):
            st.progress = p or st.progress
        if any(st.summary is not None or (st.progress and st.progress[0] == PROGRESS_STAGE) for st in self.shards):
            self._record_plan()  # a shard is at its items: the count is now the run's
        done = total = 0
        other = None
        for st in self.shards:
            if st.summary is not None:
                s = st.summary
                done += int(s.get("finished_before", 0)) + int(s.get("computed", 0))
                total += int(s.get("total", 0))
            elif st.progress and st.progress[0] == PROGRESS_STAGE:
                done += st.progress[1]
                total += st.progress[2] or 0
            elif st.progress:
                other = f"shard {st.shard}: {st.progress[0]}"
        running = sum(1 for st in self.shards if st.ref is not None)
        message = f"{done}/{total} · {running} of {len(self.shards)} Ray workers running" + \
                  (f" · {other}" if other else "") + self._eta(done, total)
        self.ctx.progress(PROGRESS_STAGE, done, total or None, message)

    def _eta(self, done: int, total: int) -> str:
        if not self.shards:
            return ""
        elapsed = time.perf_counter() - min(st.started for st in self.shards)
        before = sum(int((st.summary or {}).get("finished_before", 0)) for st in self.shards)
        computed = done - before
        if computed <= 0 or elapsed <= 0:
            return ""
        rate = computed / elapsed
        return f" · {60 * rate:.1f} samples/min · ETA {_duration(max(0, total - done) / rate)}"

    def _cancel(self, ray: Any) -> None:
        live = [st for st in self.shards if st.ref is not None]
        for st in live:
            try:
                st.actor.cancel.remote()
            except Exception:  # noqa: BLE001 - a dead worker: the wait below finds it out
                log.debug("shard %s: could not ask its worker to cancel", st.shard, exc_info=True)
        refs = {st.ref: st for st in live}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=self.cancel_grace_s) if refs else ([], [])
        for ref in ready:
            try:
                refs[ref].summary = ray.get(ref)
            except Exception as exc:  # noqa: BLE001
                refs[ref].error = f"{type(exc).__name__}"
            refs[ref].ref = None

    # ----------------------------------------------------------------------------------------- merge
    def _merge(self, seconds: float, cancelled: bool) -> RunSummary:
        from ..store import ResultsStore

        sources = []
        try:
            for st in self.shards:
                where = shard_store_dir(self.store.store_dir, self.run_id, st.shard)
                if (where / "results.sqlite").is_file():
                    sources.append(ResultsStore.open(db_path=where / "results.sqlite",
                                                     artifacts_dir=where / "artifacts"))
            self.ctx.progress("Merging shard stores", 0, None)
            if sources:
                merge_stores(self.store, sources, run_id=self.run_id)
        finally:
            for s in sources:
                s.close()
        summary = RunSummary(self.run_id, f"ray:{len(self.shards)}")
        for st in self.shards:
            s = st.summary or {}
            if st.summary is None and st.progress and st.progress[0] == PROGRESS_STAGE:
                s = {"total": st.progress[2] or 0}  # a failed shard still counts its items (as not done)
            summary.total += int(s.get("total", 0))
            summary.finished_before += int(s.get("finished_before", 0))
            summary.computed += int(s.get("computed", 0))
            for k in ("method_s", "judge_s", "runner_s", "load_s", "prepare_s"):
                setattr(summary, k, getattr(summary, k) + float(s.get(k, 0.0)))
            summary.selections.update(s.get("selections") or {})
            if s.get("placement"):
                summary.placements[str(st.shard)] = s["placement"]
            summary.notes.extend(n for n in s.get("notes") or [] if n not in summary.notes)
        counts: dict[str, int] = {}
        for it in self.store.run_items(self.run_id):
            counts[it["status"]] = counts.get(it["status"], 0) + 1
        if summary.total and sum(counts.values()) < summary.total:
            counts["pending"] = summary.total - sum(counts.values())
        summary.statuses = counts
        summary.seconds = seconds
        summary.cancelled = cancelled
        if cancelled:
            self.store.set_run_status(self.run_id, "cancelled")
        elif not all(st.summary is not None for st in self.shards):
            self.store.set_run_status(self.run_id, "incomplete")
        return summary

