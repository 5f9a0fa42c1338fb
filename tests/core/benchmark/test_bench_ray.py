"""`nemo bench run --ray`: a local Ray cluster (2 CPUs, loopback, no dashboard) started by the test runs the
benchmark's shards as actors on the instant method double; the merged result equals the single-process one,
a worker killed mid-run is replaced and resumes its shard store, and a cancel stops the workers and keeps
what they finished."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

# A single-node cluster on the loopback interface (tests may not reach the network): with "clusters" off, Ray
# uses 127.0.0.1 as the node address instead of the machine's routable one. Read when ray is imported.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
import ray  # noqa: E402 - the test extra installs it: nothing here is skipped for lack of Ray

from bench_world import base_config
from nemo_desktop.core.benchmark.config import parse_config
from nemo_desktop.core.benchmark.ray_backend import PLAN_FILE, RayBenchmark, shard_store_dir, shards_folder
from nemo_desktop.core.benchmark.records import DONE
from nemo_desktop.core.benchmark.runner import BenchmarkRunner
from nemo_desktop.core.benchmark.tables import build_tables, collect, render
from nemo_desktop.core.benchmark.work_units import Shard
from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext

HERE = Path(__file__).resolve().parent


def start_local_cluster(**resources) -> None:
    """A single-node cluster on the loopback interface with 2 CPUs (and `resources`, e.g. num_gpus=2)."""
    # This 2-core CI machine is shared: give the raylet more than Ray's default 30 s to register.
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    paths = [str(HERE), str(HERE.parents[2]), os.environ.get("PYTHONPATH", "")]
    pythonpath = os.pathsep.join(p for p in paths if p)
    os.environ["PYTHONPATH"] = pythonpath  # also for the driver killed below
    if ray.is_initialized():  # another module's cluster
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1"},
                          # the doubles as model family 'test-double' and method 'fixed' in every worker
                          "worker_process_setup_hook": "bench_world.register_doubles"}, **resources)


@pytest.fixture(scope="module")
def cluster():
    start_local_cluster()
    yield
    ray.shutdown()


def open_store(path):
    from nemo_desktop.core.store import ResultsStore

    return ResultsStore.open(db_path=path / "results.sqlite", artifacts_dir=path / "artifacts")


def config(bench_data, delay: float = 0.0) -> dict:
    """12 items (2 datasets x 3 samples x 2 method rows); the method double sleeps `delay` s per item."""
    return base_config(bench_data, samples_per_dataset=3, datasets=base_config(bench_data)["datasets"][:2],
                       classifiers={"ViT": "test-double:coded-imagenet"},
                       methods=[{"label": "Fixed", "method": "fixed", "options": {"delay": delay}},
                                {"label": "Fixed+V", "method": "fixed", "options": {"validate": True, "delay": delay}}],
                       judges={"GPT": "test-double:judge-gpt-fenced", "Claude": "test-double:judge-claude-fraction"})


def items(store, run_id):
    return {it["item_id"]: (it["status"], it["result_key"]) for it in store.run_items(run_id)}


def results(store, run_id):
    """Each item's status and the run's tables and cells (record keys name the store's own reference index,
    whose manifest lives in the store's folder, so equal results in two stores have different keys)."""
    data = collect(store, run_id)
    got = json.loads(render(data, build_tables(data), "json"))
    return ({iid: status for iid, (status, _) in items(store, run_id).items()}, got["tables"],
            sorted(map(json.dumps, got["cells"])))


def ray_run(cfg, store, **kw):
    return RayBenchmark(parse_config(cfg), store, poll_s=0.2, **kw)


def test_a_ray_run_equals_the_single_process_run(cluster, bench_data, tmp_path, registered, fixed_method):
    cfg = config(bench_data)
    whole = open_store(tmp_path / "whole")
    ref = BenchmarkRunner(parse_config(cfg), whole).run()
    assert ref.complete and ref.total == 2 * 3 * 2

    seen = []
    store = open_store(tmp_path / "ray")
    summary = ray_run(cfg, store, workers=2, ctx=JobContext(seen.append)).run()
    assert summary.shard == "ray:2" and summary.total == ref.total and summary.computed == ref.total
    assert summary.statuses == {DONE: ref.total}
    assert results(store, ref.run_id) == results(whole, ref.run_id)
    assert store.get_run(ref.run_id)["status"] == "complete" and store.check() == []
    for i in (0, 1):  # each shard wrote its own store, holding its half
        part = open_store(shard_store_dir(store.store_dir, ref.run_id, Shard(i, 2)))
        assert 0 < len(part.run_items(ref.run_id)) < ref.total
        part.close()
    bench = [p for p in seen if p.stage == "Benchmark" and p.total]
    assert bench and bench[-1].done == ref.total == bench[-1].total and "Ray workers" in bench[-1].message

    again = ray_run(cfg, store, workers=2).run()  # everything finished: nothing computed again
    assert again.computed == 0 and again.finished_before == ref.total and again.statuses == {DONE: ref.total}
    whole.close()
    store.close()


def test_a_killed_worker_is_replaced_and_its_shard_resumes(cluster, bench_data, tmp_path, registered, fixed_method):
    cfg = config(bench_data, delay=0.5)
    run_id = parse_config(cfg).run_id
    store = open_store(tmp_path / "ray")
    backend = ray_run(cfg, store, workers=2)
    killed: dict = {}

    def on_progress(p):
        st = backend.shards[0] if backend.shards else None
        if killed or st is None or st.ref is None or not st.progress or st.progress[0] != "Benchmark":
            return
        part = open_store(shard_store_dir(store.store_dir, run_id, st.shard))
        done = {iid for iid, (status, _) in items(part, run_id).items() if status == DONE}
        part.close()
        if done:
            killed["done"] = done
            os.kill(ray.get(st.actor.pid.remote()), signal.SIGKILL)

    backend.ctx = JobContext(on_progress)
    summary = backend.run()
    assert killed, "the run ended before a worker could be killed"
    first = backend.shards[0]
    assert first.attempts == 2 and first.summary is not None
    # The replacement found what its predecessor finished and computed only the rest: nothing twice.
    assert first.summary["finished_before"] >= len(killed["done"])
    assert first.summary["computed"] == first.summary["total"] - first.summary["finished_before"]
    assert summary.statuses == {DONE: 12} and store.get_run(run_id)["status"] == "complete"

    whole = open_store(tmp_path / "whole")
    BenchmarkRunner(parse_config(cfg), whole).run()
    assert results(store, run_id) == results(whole, run_id)
    whole.close()
    store.close()


def test_cancel_stops_the_workers_keeps_their_items_and_resumes(cluster, bench_data, tmp_path, registered,
                                                                fixed_method):
    cfg = config(bench_data, delay=0.3)
    run_id = parse_config(cfg).run_id
    store = open_store(tmp_path / "ray")
    token = CancelToken()

    def on_progress(p):
        if p.stage == "Benchmark" and p.done >= 2:
            token.cancel()

    backend = ray_run(cfg, store, workers=2, ctx=JobContext(on_progress, cancel=token))
    with pytest.raises(JobCancelled):
        backend.run()
    assert all(st.ref is None for st in backend.shards)  # every worker returned within the grace period
    kept = {iid for iid, (status, _) in items(store, run_id).items() if status == DONE}
    assert 2 <= len(kept) < 12 and store.get_run(run_id)["status"] == "cancelled"

    again = ray_run(cfg, store, workers=4).run()  # another worker count: the run keeps its 2 shards
    assert len(again_shards := [p for p in shards_folder(store.store_dir, run_id).iterdir() if p.is_dir()]) == 2, \
        again_shards
    assert (shards_folder(store.store_dir, run_id) / PLAN_FILE).is_file()
    assert again.finished_before >= len(kept) and again.computed == 12 - again.finished_before
    assert again.statuses == {DONE: 12}
    store.close()


def test_the_command_line_runs_on_ray(cluster, bench_data, tmp_path, registered, fixed_method, capsys):
    from nemo_desktop.cli.main import main

    cfg = tmp_path / "bench.json"
    cfg.write_text(json.dumps(config(bench_data)))
    assert main(["bench", "run", str(cfg), "--ray", "--shard", "1/2", "--store", str(tmp_path / "s")]) == 2
    assert "--ray and --shard" in capsys.readouterr().err
    assert main(["bench", "run", str(cfg), "--ray-workers", "2", "--store", str(tmp_path / "s")]) == 2
    out = tmp_path / "summary.json"
    assert main(["bench", "run", str(cfg), "--ray", "--ray-workers", "2", "--store", str(tmp_path / "s"),
                 "-o", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["shard"] == "ray:2" and summary["statuses"] == {DONE: 12} and summary["complete"]


def test_a_killed_driver_resumes_with_nothing_lost_or_repeated(cluster, bench_data, tmp_path, registered,
                                                               fixed_method):
    """`nemo bench run --ray` in a child process joined to this cluster, killed with SIGKILL mid-run (its
    actors die with its job); the same command again finishes the rest from the shard stores."""
    import subprocess
    import sys
    import time

    cfg = config(bench_data, delay=0.5)
    run_id = parse_config(cfg).run_id
    cfg_path = tmp_path / "bench.json"
    cfg_path.write_text(json.dumps(cfg))
    store_dir = tmp_path / "s"
    env = {**os.environ, "NEMO_TEST_RAY_ADDRESS": ray.get_runtime_context().gcs_address,
           "NEMO_HOME": str(tmp_path / "home")}
    command = [sys.executable, str(HERE / "bench_child.py"), "bench", "run", str(cfg_path), "--ray",
               "--ray-workers", "2", "--store", str(store_dir)]

    def done_in_shards() -> set[str]:
        out: set[str] = set()
        for i in (0, 1):
            where = shard_store_dir(store_dir, run_id, Shard(i, 2))
            if (where / "results.sqlite").is_file():
                part = open_store(where)
                out |= {iid for iid, (status, _) in items(part, run_id).items() if status == DONE}
                part.close()
        return out

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 240
    before: set[str] = set()
    while time.monotonic() < deadline and proc.poll() is None and len(before) < 2:
        time.sleep(0.2)
        before = done_in_shards()
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()}"
    proc.kill()
    proc.wait(timeout=30)
    time.sleep(1.0)  # Ray stops the dead driver's actors
    before = done_in_shards()
    assert 2 <= len(before) < 12

    out = tmp_path / "again.json"
    again = subprocess.run([*command, "-o", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert summary["finished_before"] >= len(before) and summary["computed"] == 12 - summary["finished_before"]
    assert summary["statuses"] == {DONE: 12}
    store = open_store(store_dir)
    assert store.get_run(run_id)["status"] == "complete"
    store.close()


def test_without_ray_installed_the_error_says_how_to_get_it(monkeypatch, bench_data, store):
    from nemo_desktop.core.base.errors import ConfigError

    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # what `import ray` meets when it is absent
    with pytest.raises(ConfigError, match="needs Ray") as err:
        RayBenchmark(parse_config(config(bench_data)), store).run()
    assert "nemo-desktop[ray]" in err.value.hint
    with pytest.raises(ConfigError, match="at least 1"):
        RayBenchmark(parse_config(config(bench_data)), store, workers=0)
