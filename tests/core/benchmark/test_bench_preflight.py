"""Ray runs that fail fast (issue 31 §4): the whole config is checked on the driver before a cluster, an actor or a
file is started; plan.json (the run's shard count) is written only once work has started; a CPU-only cluster
gets a capped default shard count; `nemo bench configs` lists the shipped configs. No cluster is started here."""
from __future__ import annotations

import json

import pytest

from bench_world import base_config
from nemo_desktop.cli.main import main
from nemo_desktop.core.benchmark import ray_backend
from nemo_desktop.core.benchmark.config import parse_config
from nemo_desktop.core.benchmark.preflight import check_config, problems
from nemo_desktop.core.benchmark.ray_backend import (CPUS_PER_SHARD, LAUNCH_FILE, PLAN_FILE, RayBenchmark,
                                                     cpu_share, default_shards, shard_store_dir, shards_folder)
from nemo_desktop.core.benchmark.records import RUN_KIND
from nemo_desktop.core.benchmark.work_units import Shard
from nemo_desktop.core.base.errors import ConfigError


def fixed_config(bench_data, **over) -> dict:
    """One dataset, one classifier, the instant method double; `over` replaces any key."""
    return base_config(bench_data, **{"samples_per_dataset": 1, "datasets": base_config(bench_data)["datasets"][1:2],
                                      "classifiers": {"ViT": "test-double:coded-imagenet"},
                                      "methods": [{"label": "Fixed", "method": "fixed"}], **over})


def test_a_good_config_has_no_problem(bench_data, registered, fixed_method):
    assert problems(parse_config(base_config(bench_data))) == []
    check_config(parse_config(fixed_config(bench_data)))


def test_every_problem_is_named_at_once(bench_data, tmp_path, registered, fixed_method):
    cfg = fixed_config(bench_data,
                       datasets=[{"kind": "imagenet-d", "root": str(tmp_path / "no-such-root"), "label": "D"},
                                 {"kind": "folder", "root": str(tmp_path), "label": "empty"}],
                       mllms={"Qwen": "no-such-mllm"},
                       methods=[{"label": "Fixed", "method": "fixed"}, {"label": "Nope", "method": "no-such-method"},
                                {"label": "Bad k", "method": "scitx", "options": {"k": -4}}])
    with pytest.raises(ConfigError) as err:
        check_config(parse_config(cfg))
    message = err.value.message
    assert message.startswith("The benchmark config has 5 problems")
    for part in ("dataset 'D'", "no-such-root", "dataset 'empty'", "mllm 'Qwen'", "no-such-mllm",
                 "method 'Nope' (no-such-method)", "method 'Bad k' (scitx)"):
        assert part in message, part
    assert "Nothing was started" in err.value.hint


def test_judges_need_a_criterion_for_every_dataset(bench_data, tmp_path, registered, fixed_method):
    folder = bench_data["imagenet-d"]["root"]  # any folder of class folders, as a generic dataset
    cfg = fixed_config(bench_data, datasets=[{"kind": "folder", "root": str(folder), "label": "mine"}])
    found = problems(parse_config(cfg))
    assert len(found) == 1 and "dataset 'mine'" in found[0] and "criterion" in found[0]
    cfg["datasets"][0]["criterion"] = "the background"
    assert problems(parse_config(cfg)) == []


@pytest.fixture
def no_cluster(monkeypatch):
    """Any attempt to start or join Ray fails the test."""
    ray = ray_backend.import_ray()

    def start(*_a, **_k):
        raise AssertionError("Ray was started before the config was checked")

    monkeypatch.setattr(ray, "init", start)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)


def test_a_ray_run_with_a_wrong_root_fails_before_anything_starts(bench_data, tmp_path, store, registered,
                                                                   fixed_method, no_cluster):
    cfg = fixed_config(bench_data, datasets=[{"kind": "imagenet-d", "root": str(tmp_path / "typo"), "label": "D"}])
    config = parse_config(cfg)
    with pytest.raises(ConfigError, match="typo"):
        RayBenchmark(config, store, workers=3).run()
    assert not shards_folder(store.store_dir, config.run_id).exists()  # no plan.json fixing 3 shards


def test_the_command_line_refuses_the_config_at_once(bench_data, tmp_path, registered, fixed_method, no_cluster,
                                                     capsys):
    cfg = tmp_path / "bench.json"
    cfg.write_text(json.dumps(fixed_config(bench_data, datasets=[
        {"kind": "imagenet-d", "root": str(tmp_path / "typo"), "label": "D"}])))
    assert main(["bench", "run", str(cfg), "--ray", "--store", str(tmp_path / "s"), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["type"] == "ConfigError" and "typo" in error["message"]
    assert not (tmp_path / "s" / "bench").exists()


def test_the_shard_count_is_fixed_only_once_work_started(bench_data, store, registered, fixed_method):
    config = parse_config(fixed_config(bench_data))
    backend = RayBenchmark(config, store, workers=3)
    folder = shards_folder(store.store_dir, config.run_id)
    assert backend._plan(default=5) == 3 and not folder.exists()  # choosing writes nothing
    assert RayBenchmark(config, store)._plan(default=5) == 5

    backend._launch()  # a launch that failed before any shard started its items
    assert (folder / LAUNCH_FILE).is_file() and not (folder / PLAN_FILE).exists()
    assert RayBenchmark(config, store, workers=2)._plan(default=5) == 2  # nothing fixed the count

    empty = shard_store_dir(store.store_dir, config.run_id, Shard(0, 3))  # a shard store without items
    _open(empty).close()
    assert RayBenchmark(config, store, workers=2)._plan(default=5) == 2

    part = _open(empty)  # a shard that finished an item: a driver killed before it wrote plan.json
    part.create_run(RUN_KIND, {}, run_id=config.run_id)
    part.add_run_item(config.run_id, "item-1", None, "done")
    part.close()
    assert RayBenchmark(config, store, workers=2)._plan(default=5) == 3

    backend.shards = [object(), object(), object()]
    backend._record_plan()
    assert json.loads((folder / PLAN_FILE).read_text())["shards"] == 3
    assert "token" not in json.loads((folder / PLAN_FILE).read_text())
    again = RayBenchmark(config, store, workers=7)
    assert again._plan(default=5) == 3 and again.planned


def _open(where):
    from nemo_desktop.core.store import ResultsStore

    return ResultsStore.open(db_path=where / "results.sqlite", artifacts_dir=where / "artifacts")


def test_default_shards_one_per_gpu_or_per_eight_cpus():
    assert CPUS_PER_SHARD == 8
    assert default_shards(gpus=4, cpus=64) == 4
    assert default_shards(gpus=0, cpus=64) == 8  # was 64 shards, each loading every model
    assert default_shards(gpus=0, cpus=12) == 1 and default_shards(gpus=0, cpus=2) == 1
    assert cpu_share(64, 8) == 8 and cpu_share(64, 2) == 8 and cpu_share(2, 2) == 1 and cpu_share(12, 1) == 8


def test_bench_configs_lists_the_shipped_configs(capsys):
    assert main(["bench", "configs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    names = [c["name"] for c in listed["configs"]]
    assert names == ["table1", "table2", "table3", "table4", "table5"]
    for c in listed["configs"]:
        assert c["path"].startswith(listed["folder"]) and c["description"].startswith("Table ")
        parse_config(__import__("tomllib").loads(open(c["path"], encoding="utf-8").read()))  # each one parses
    assert main(["bench", "configs"]) == 0
    out = capsys.readouterr().out
    assert listed["folder"] in out and "table5  Table 5: observation retrieval" in out


def test_bench_run_help_points_to_bench_configs(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "nemo bench configs" in text and "nemo_desktop/resources" not in text
