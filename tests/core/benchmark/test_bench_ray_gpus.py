"""`nemo bench run --ray` on a cluster with GPUs gives every shard's actor one GPU of its own. The test's
cluster declares two logical GPUs (Ray schedules them as it schedules real ones and sets each actor's
CUDA_VISIBLE_DEVICES; nothing here needs a real device): two shards, one per GPU, each on a different one."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback node address (see test_bench_ray)
import pytest  # noqa: E402
import ray  # noqa: E402

from nemo_desktop.core.benchmark.config import parse_config  # noqa: E402
from nemo_desktop.core.benchmark.ray_backend import RayBenchmark  # noqa: E402
from nemo_desktop.core.benchmark.records import DONE  # noqa: E402
from test_bench_ray import config, open_store  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def gpu_cluster():
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    paths = [str(HERE), str(HERE.parents[2]), os.environ.get("PYTHONPATH", "")]
    pythonpath = os.pathsep.join(p for p in paths if p)
    os.environ["PYTHONPATH"] = pythonpath
    if ray.is_initialized():  # another module's cluster (module fixtures end in order; be safe)
        ray.shutdown()
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1"},
                          "worker_process_setup_hook": "bench_world.register_doubles"})
    yield
    ray.shutdown()


def test_each_shard_gets_a_gpu_of_its_own(gpu_cluster, bench_data, tmp_path, registered, fixed_method):
    cfg = config(bench_data)
    store = open_store(tmp_path / "ray")
    summary = RayBenchmark(parse_config(cfg), store, poll_s=0.2).run()  # no --ray-workers: one per GPU
    assert summary.statuses == {DONE: 12} and summary.shard == "ray:2"
    placed = summary.placements
    assert sorted(placed) == ["1/2", "2/2"]
    gpus = [tuple(p["gpu_ids"]) for p in placed.values()]
    assert all(len(g) == 1 for g in gpus) and len(set(gpus)) == 2, placed  # one GPU each, not the same one
    assert all(p["cuda_visible_devices"] == p["gpu_ids"][0] for p in placed.values())
    store.close()
