"""`nemo bench run / merge / table` through the real command line (test doubles as the model family)."""
from __future__ import annotations

import csv
import io
import json

import pytest

from bench_world import base_config
from nemo_desktop.cli.main import main


def test_run_shards_merge_and_tables(bench_data, registered, tmp_path, capsys):
    cfg = base_config(bench_data, datasets=base_config(bench_data)["datasets"][1:], samples_per_dataset=2)
    cfg_path = tmp_path / "bench.toml"
    cfg_path.write_text(_toml(cfg))
    for i in (1, 2):
        assert main(["bench", "run", str(cfg_path), "--shard", f"{i}/2", "--store", str(tmp_path / f"s{i}"),
                     "-o", str(tmp_path / f"s{i}.json")]) == 0
    out = capsys.readouterr().out
    assert "Tables: nemo bench table" in out
    run_id = json.loads((tmp_path / "s1.json").read_text())["run_id"]
    from nemo_desktop.cli.progress import StageBars

    seen = []
    with pytest.MonkeyPatch.context() as mp:  # the merge reports its items to the command's bar
        mp.setattr(StageBars, "__call__", lambda self, p: seen.append((p.stage, p.done, p.total)))
        assert main(["bench", "merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--into",
                     str(tmp_path / "m")]) == 0
    assert f"Merged run {run_id}: done 8" in capsys.readouterr().out
    assert (f"Merging {run_id}", 8, 8) in seen
    assert main(["bench", "merge", str(tmp_path / "s1"), "--into", str(tmp_path / "m"), "--json"]) == 0  # idempotent
    assert json.loads(capsys.readouterr().out)["statuses"][run_id] == {"done": 8}

    with pytest.MonkeyPatch.context() as mp:  # reading the run's items reports to the command's bar
        seen.clear()
        mp.setattr(StageBars, "__call__", lambda self, p: seen.append((p.stage, p.done, p.total)))
        assert main(["bench", "table", run_id, "--store", str(tmp_path / "m"), "--format", "csv"]) == 0
    assert seen[0] == ("Reading results", 0, 8) and seen[-1] == ("Reading results", 8, 8)
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    llm = [r for r in rows if r["table"] == "table1a"]
    assert {r["column"] for r in llm} == {"objectnet / ViT", "objectnet / CLIP", "imagenet-d / ViT",
                                         "imagenet-d / CLIP"}
    assert all(r["row"] == "SciTX" and float(r["value"]) == 1.0 and r["n"] == "2" for r in llm)

    assert main(["bench", "table", run_id, "--store", str(tmp_path / "m"), "--format", "json",
                 "--table", "1", "timings"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run_id"] == run_id and {t["id"] for t in data["tables"]} == {"table1a", "table1b", "timings"}
    assert main(["bench", "table", run_id, "--store", str(tmp_path / "m"), "-o", str(tmp_path / "t.md")]) == 0
    assert "Table 1b. CEI" in (tmp_path / "t.md").read_text()
    capsys.readouterr()
    # --json: the tables as JSON on stdout, nothing else there; with -o the JSON goes to the file instead.
    assert main(["bench", "table", run_id, "--store", str(tmp_path / "m"), "--json", "--table", "1"]) == 0
    assert {t["id"] for t in json.loads(capsys.readouterr().out)["tables"]} == {"table1a", "table1b"}
    assert main(["bench", "table", run_id, "--store", str(tmp_path / "m"), "--json", "-o",
                 str(tmp_path / "t.json")]) == 0
    assert capsys.readouterr().out == "" and json.loads((tmp_path / "t.json").read_text())["run_id"] == run_id
    # bench run --json: the summary as JSON on stdout (the finished run answers from its store at once).
    assert main(["bench", "run", str(cfg_path), "--shard", "1/2", "--store", str(tmp_path / "s1"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run_id


def test_user_errors_are_messages_not_tracebacks(bench_data, registered, tmp_path, capsys):
    assert main(["bench", "run", str(tmp_path / "missing.toml")]) == 2
    assert "not found" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(base_config(bench_data, methods=[{"method": "no-such-method"}])))
    assert main(["bench", "run", str(bad), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "Unknown explanation method" in err and "hint:" in err
    assert main(["bench", "table", "nope", "--store", str(tmp_path / "s")]) == 2
    assert "no benchmark run" in capsys.readouterr().err
    assert main(["bench", "merge", str(tmp_path / "nowhere")]) == 2


def test_a_summary_that_cannot_be_written_is_exit_3_after_the_work(bench_data, registered, tmp_path, monkeypatch,
                                                                    capsys):
    """The output folder is checked before the run; one removed while the run works is a one-line error, exit 3,
    JSON under --json (the finished items are stored all the same)."""
    from nemo_desktop.core.benchmark.runner import BenchmarkRunner

    cfg = tmp_path / "bench.json"
    cfg.write_text(json.dumps(base_config(bench_data, datasets=base_config(bench_data)["datasets"][1:2],
                                          samples_per_dataset=1)))
    with pytest.raises(SystemExit) as refused:  # a missing folder: refused before the run
        main(["bench", "run", str(cfg), "--store", str(tmp_path / "s"), "-o", str(tmp_path / "no" / "x.json")])
    assert refused.value.code == 2 and not (tmp_path / "s").exists()
    capsys.readouterr()

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    original = BenchmarkRunner.run

    def run_then_lose_the_folder(self):
        summary = original(self)
        out_dir.rmdir()
        return summary

    monkeypatch.setattr(BenchmarkRunner, "run", run_then_lose_the_folder)
    rc = main(["bench", "run", str(cfg), "--store", str(tmp_path / "s"), "-o", str(out_dir / "x.json"), "--json"])
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert rc == 3 and error["type"] == "StoreError" and error["exit_code"] == 3
    assert str(out_dir / "x.json") in error["message"] and "Traceback" not in err


def _toml(d: dict) -> str:
    """Enough TOML for the test configs (tables of strings / inline tables, arrays of tables)."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"

    lines, tables = [], []
    for k, v in d.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                tables.append(f"\n[[{k}]]")
                tables += [f"{kk} = {value(vv)}" for kk, vv in item.items()]
        elif isinstance(v, dict):
            tables.append(f"\n[{k}]")
            tables += [f"{json.dumps(kk)} = {value(vv)}" for kk, vv in v.items()]
        else:
            lines.append(f"{k} = {value(v)}")
    return "\n".join(lines + tables) + "\n"
