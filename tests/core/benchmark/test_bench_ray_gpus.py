"""`nemo bench run --ray` on a cluster with GPUs gives every shard's actor one GPU of its own. The test's
cluster declares two logical GPUs (Ray schedules them as it schedules real ones and sets each actor's
CUDA_VISIBLE_DEVICES; nothing here needs a real device): two shards, one per GPU, each on a different one."""
from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback node address (see test_bench_ray)
import pytest  # noqa: E402
import ray  # noqa: E402

from nemo_desktop.core.benchmark.config import parse_config  # noqa: E402
from nemo_desktop.core.benchmark.ray_backend import RayBenchmark  # noqa: E402
from nemo_desktop.core.benchmark.records import DONE  # noqa: E402
from test_bench_ray import config, open_store, start_local_cluster  # noqa: E402


@pytest.fixture(scope="module")
def gpu_cluster():
    start_local_cluster(num_gpus=2)
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
