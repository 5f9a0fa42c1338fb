"""The benchmark runner end to end on the tiny benchmark layouts (SciTX with test doubles as models)."""
from __future__ import annotations

import json

import pytest

from bench_world import base_config, doubles_loader
from nemo_desktop.core.benchmark.config import parse_config
from nemo_desktop.core.benchmark.merge import merge_stores
from nemo_desktop.core.benchmark.records import DONE, ERROR, FAILED, SAMPLE_KIND, SELECTION_KIND, SHARD_KIND
from nemo_desktop.core.benchmark.runner import BenchmarkRunner
from nemo_desktop.core.benchmark.work_units import Shard
from nemo_desktop.core.benchmark.tables import build_tables, collect, render
from nemo_desktop.core.base.errors import ConfigError, StoreError
from nemo_desktop.core.models.vocab import load_vocabulary


def open_store(path):
    from nemo_desktop.core.store import ResultsStore

    return ResultsStore.open(db_path=path / "results.sqlite", artifacts_dir=path / "artifacts")


def run(config: dict, store, made=None, **kw):
    return BenchmarkRunner(parse_config(config), store, loader=doubles_loader(made), **kw).run()


def test_full_run_selects_explains_judges_and_records(bench_data, store):
    s = run(base_config(bench_data), store)
    assert s.total == 3 * 2 * 2 and s.statuses == {DONE: 12} and s.complete and s.computed == 12
    assert store.get_run(s.run_id)["status"] == "complete"
    # Selections: only misclassified images of each benchmark, per its own protocol.
    for pair, sel in s.selections.items():
        dataset = pair.split("|")[0]
        rec = store.get(sel["key"])
        assert rec.kind == SELECTION_KIND and rec.payload["seed"] == 3 and len(rec.payload["selected"]) == 2
        assert {o["sample_id"] for o in rec.payload["selected"]} <= set(bench_data[dataset]["wrong"])
        assert rec.payload["n_misclassified"] == len(bench_data[dataset]["wrong"])
    # The reference database: the dataset plus the ImageNet subset images of its classes.
    from nemo_desktop.core.benchmark.datasets import subset_wnids
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    mini = set(subset_wnids("mini-imagenet"))
    val = [w for w in bench_data["val_wnids"] if w in mini]
    assert 0 < len(val) < len(bench_data["val_wnids"])
    idx = ReferenceIndex.load(store, s.selections["imagenet-d|ViT"]["index_id"])
    assert len(idx) == 7 + 2 * len(val)  # every ImageNet class is a class of the 1000-way ImageNet-D view
    r_idx = ReferenceIndex.load(store, s.selections["imagenet-r|ViT"]["index_id"])
    r_wnids = set(load_vocabulary("imagenet-r").wnids)
    assert len(r_idx) == 16 + 2 * sum(w in r_wnids for w in val)
    from_val = ["/val/" in p for p in r_idx.entries.paths.tolist()]
    assert sum(from_val) == 2 and r_idx.entries.correct[from_val].all()  # the toucans, classified right
    # Every item points at a sample record holding the explanation, its artifacts, LLM Match and timings.
    for it in store.run_items(s.run_id):
        rec = store.get(it["result_key"])
        assert rec.kind == SAMPLE_KIND
        p = rec.payload
        assert p["result"]["explanation"] and p["cei"] == p["result"]["cei"]
        assert p["llm_match"]["score"] == 1.0 and set(p["llm_match"]["judges"]) == {"GPT", "Claude", "Gemini"}
        assert p["timings"]["stages"]["total"] > 0 and p["method"] == "SciTX"
        # ObjectNet's 2-pixel border is cropped on load, as its standard loaders do.
        side = 28 if it["item_id"].split("|")[0].lower() == "objectnet" else 32
        assert "input" in rec.artifacts and rec.load_image("input").size == (side, side), it["item_id"]
    assert store.check() == []
    d = collect(store, s.run_id)
    md = render(d, build_tables(d), "md")
    assert "Table 1a. LLM Match" in md and "| SciTX | **1.000**" in md and "Table 2" not in md


def test_run_report_reads_the_run(bench_data, store):
    from nemo_desktop.core.reports.model import build_run_report

    s = run(base_config(bench_data, datasets=base_config(bench_data)["datasets"][:1]), store)
    doc = build_run_report(s.run_id, store)
    text = json.dumps(doc, default=lambda o: getattr(o, "__dict__", str(o)))
    assert f"{s.total} ({s.total} with results, 0 failed or missing)" in text  # every item readable
    assert "SciTX" in text or "scitx" in text


def test_a_second_run_skips_finished_items_without_loading_work(bench_data, store):
    cfg = base_config(bench_data)
    first = run(cfg, store)
    made: dict = {}
    again = run(cfg, store, made)
    assert again.run_id == first.run_id and again.computed == 0 and again.finished_before == 12
    assert all(o.calls == 0 for label in ("Qwen", "GPT", "Claude", "Gemini") for o in made.get(label, []))
    assert len(store.run_items(first.run_id)) == 12
    assert len(store.find(kind=SAMPLE_KIND)) == 12


def test_an_item_in_flight_is_finished_from_its_stored_units(bench_data, store):
    cfg = base_config(bench_data)
    s = run(cfg, store)
    victim = store.run_items(s.run_id)[5]
    with store.transaction() as conn:  # as if killed before its item was recorded
        conn.execute("DELETE FROM run_items WHERE run_id=? AND item_id=?", (s.run_id, victim["item_id"]))
    made: dict = {}
    again = run(cfg, store, made)
    assert again.computed == 1 and again.statuses == {DONE: 12}
    assert made["Qwen"][0].calls == 0  # the stored explanation was reused, not recomputed
    assert store.run_items(s.run_id)[-1]["result_key"] == victim["result_key"]


def test_judges_after_explanations(bench_data, store):
    cfg = base_config(bench_data, judge_mode="after")
    s = run(cfg, store)
    assert s.statuses == {DONE: 12}
    assert all(store.get(it["result_key"]).payload["llm_match"]["score"] == 1.0 for it in store.run_items(s.run_id))
    # The execution mode is not part of the run's identity.
    assert s.run_id == parse_config(base_config(bench_data)).run_id


def test_shards_merge_into_the_unsharded_result(bench_data, tmp_path):
    cfg = base_config(bench_data, samples_per_dataset=3)
    whole = open_store(tmp_path / "whole")
    ref = run(cfg, whole)
    shards = [open_store(tmp_path / f"shard{i}") for i in (1, 2)]
    parts = [run(cfg, st, shard=Shard.parse(f"{i}/2")) for i, st in zip((1, 2), shards)]
    assert sum(p.total for p in parts) == ref.total and all(p.complete for p in parts)
    ids = [{it["item_id"] for it in st.run_items(ref.run_id)} for st in shards]
    assert not ids[0] & ids[1] and ids[0] | ids[1] == {it["item_id"] for it in whole.run_items(ref.run_id)}
    target = open_store(tmp_path / "merged")
    report = merge_stores(target, shards)
    assert report.runs == [ref.run_id] and report.statuses[ref.run_id] == {DONE: ref.total}
    assert target.get_run(ref.run_id)["status"] == "complete" and not report.missing_records
    assert target.check() == []
    want = json.loads(render(collect(whole, ref.run_id), build_tables(collect(whole, ref.run_id)), "json"))
    got = json.loads(render(collect(target, ref.run_id), build_tables(collect(target, ref.run_id)), "json"))
    assert got["tables"] == want["tables"]
    assert sorted(map(json.dumps, got["cells"])) == sorted(map(json.dumps, want["cells"]))
    assert len(target.find(kind=SHARD_KIND, run_id=ref.run_id)) == 2
    again = merge_stores(target, shards)  # idempotent
    assert again.copied_records == 0 and again.statuses == report.statuses
    for st in (whole, *shards, target):
        st.close()


def test_merge_refuses_different_configurations(bench_data, tmp_path):
    a, b = open_store(tmp_path / "a"), open_store(tmp_path / "b")
    cfg = base_config(bench_data, datasets=base_config(bench_data)["datasets"][:1])
    s = run(cfg, a)
    b.create_run("benchmark", {"config_sha256": "something else"}, run_id=s.run_id)
    with pytest.raises(StoreError, match="different configurations"):
        merge_stores(open_store(tmp_path / "t"), [a, b])
    with pytest.raises(StoreError, match="holds the benchmark run"):
        merge_stores(open_store(tmp_path / "t2"), [a], run_id="nope")


def test_failures_are_recorded_and_only_transient_ones_retried(bench_data, store, tmp_path, fixed_method):
    marker = tmp_path / "fixed"
    cfg = base_config(bench_data, datasets=[base_config(bench_data)["datasets"][2]], judges={},
                      classifiers={"ViT": "test-double:coded-imagenet"}, samples_per_dataset=3,
                      methods=[{"label": "Fixed", "method": "fixed",
                                "options": {"fail_on": "background/", "flaky_on": "texture/",
                                            "flaky_marker": str(marker)}}])
    s = run(cfg, store)
    by_status: dict = {}
    for it in store.run_items(s.run_id):
        by_status.setdefault(it["status"], []).append(it)
    assert set(by_status) == {DONE, FAILED, ERROR} and not s.complete
    assert "true class" in by_status[FAILED][0]["error"]["message"]
    cuda = by_status[ERROR][0]["error"]  # a failed kernel said in words; CUDA's own text kept in the details
    assert "failed on the GPU" in cuda["message"] and "CUDA error" in cuda["detail"]
    assert store.get_run(s.run_id)["status"] == "incomplete"
    # The method did not store its result: the runner did, so the sample record can point at it.
    done = store.get(by_status[DONE][0]["result_key"])
    assert store.get(done.payload["explanation_key"]).kind == "explanation"
    marker.touch()  # the "GPU" works again
    made: dict = {}
    again = run(cfg, store, made)
    assert again.computed == 1 and again.statuses == {DONE: 2, FAILED: 1}
    assert again.complete  # a final failure counts as finished
    third = run(cfg, store, retry_failed=True)
    assert third.computed == 1 and third.statuses == {DONE: 2, FAILED: 1}


def test_configuration_errors_say_what_to_fix(bench_data, store, fixed_method):
    with pytest.raises(ConfigError, match="no option"):
        run(base_config(bench_data, methods=[{"method": "scitx", "options": {"kk": 1}}]), store)
    with pytest.raises(ConfigError, match="no editors"):
        run(base_config(bench_data, editors={}), store)
    with pytest.raises(ConfigError, match="Unknown benchmark config key"):
        parse_config({**base_config(bench_data), "dataset": []})
    with pytest.raises(ConfigError, match="share the label"):
        parse_config(base_config(bench_data, methods=["scitx", "scitx"]))
    with pytest.raises(ConfigError, match="not usable"):
        parse_config(base_config(bench_data, classifiers={"a/b": "x"}))
    with pytest.raises(ConfigError, match="criterion"):
        cfg = base_config(bench_data, datasets=[{"kind": "folder", "root": str(bench_data["imagenet-r"]["root"])}])
        run(cfg, store)
    with pytest.raises(ConfigError, match="--shard"):
        Shard.parse("0/2")


def test_tables_2_to_5_from_their_axes(bench_data, store, fixed_method):
    plain = {"label": "Plain", "method": "fixed", "options": {"class_relevance": True}}
    cfg = base_config(
        bench_data, datasets=[base_config(bench_data)["datasets"][2]], samples_per_dataset=2,
        mllms={"A": "test-double:scripted-A", "B": "test-double:scripted-B"},
        editors={"E1": "test-double:restoring-1", "E2": "test-double:restoring-2"},
        methods=[plain,
                 {"label": "Plain+V", "method": "fixed", "validation": True, "variant_of": "Plain",
                  "options": {"validate": True}},
                 {"label": "Plain-noCR", "method": "fixed", "options": {"class_relevance": False}}])
    s = run(cfg, store)
    assert s.complete and s.total == 2 * (2 * 2 * 3) + 2 * (2 * 1 * 3)  # ViT has the editor axis, CLIP not
    data = collect(store, s.run_id)
    tables = {t.title: t for t in build_tables(data)}
    ids = [t.id for t in build_tables(data)]
    assert {"table1a", "table1b", "table2", "table3", "table4", "table5"} <= set(ids)
    t3 = next(t for t in tables.values() if t.id == "table3" and "ViT" in t.title)
    row = dict(t3.rows)["Plain"]
    assert [v.value for v in row] == [2.0, 2.5]  # MLLM A: 2 (class relevance) + 0.5 for editor E2
    assert dict(t3.rows)["Plain+V"][0].note == "(1)"
    t4 = next(t for t in tables.values() if t.id == "table4" and "ViT" in t.title and "E1" in t.title)
    assert [v.value for v in dict(t4.rows)["Plain"]][1::2] == [2.0, 3.0]  # CEI with A, with B
    assert [v.value for v in dict(t4.rows)["Plain+V"]][0::2] == [1.0, 1.0]  # judges: 'background' -> 1.0
    assert [v.value for v in dict(t4.rows)["Plain"]][0::2] == [0.5, 0.5]  # 'hidden' -> 0.5
    t2 = next(t for t in tables.values() if t.id == "table2" and "CLIP" in t.title and "MLLM A" in t.title)
    plain_row = dict(t2.rows)["Plain"]
    assert [v.value for v in plain_row] == [0.5, 2.0, 1.0, 12.0] and plain_row[3].note == "+10.00"
    t5 = next(t for t in tables.values() if t.id == "table5" and "MLLM A" in t.title and "E1" in t.title)
    assert [[v.value for v in vals] for _, vals in t5.rows] == [[0.0, 0.0], [2.0, 2.0]]
    csv_text = render(data, build_tables(data), "csv")
    assert csv_text.splitlines()[0] == "table,title,row,column,metric,value,n,note"
    assert any(line.startswith("table3,") for line in csv_text.splitlines())
    timings = render(data, build_tables(data, ["timings"]), "md")
    assert "runner overhead" in timings and "explain" in timings


def test_shards_sharing_one_store_mark_the_run_complete_only_at_the_end(bench_data, store):
    cfg = base_config(bench_data, datasets=base_config(bench_data)["datasets"][:1], samples_per_dataset=3)
    first = run(cfg, store, shard=Shard.parse("1/2"))
    assert first.complete and store.get_run(first.run_id)["status"] == "incomplete"
    second = run(cfg, store, shard=Shard.parse("2/2"))
    assert second.complete and store.get_run(first.run_id)["status"] == "complete"
    assert first.total + second.total == len(store.run_items(first.run_id)) == 2 * 3


def test_cancel_between_items_keeps_finished_ones_and_resumes(bench_data, store):
    from nemo_desktop.core.base.errors import JobCancelled
    from nemo_desktop.core.base.job_context import CancelToken, JobContext

    cfg = base_config(bench_data, datasets=base_config(bench_data)["datasets"][:1])
    token = CancelToken()

    def on_progress(p):
        if p.stage == "Benchmark" and p.done >= 2:
            token.cancel()

    with pytest.raises(JobCancelled):
        BenchmarkRunner(parse_config(cfg), store, loader=doubles_loader(),
                        ctx=JobContext(on_progress, cancel=token)).run()
    run_id = parse_config(cfg).run_id
    assert store.get_run(run_id)["status"] == "cancelled"
    kept = {it["item_id"] for it in store.run_items(run_id) if it["status"] == DONE}
    assert len(kept) >= 2
    again = run(cfg, store)
    assert again.finished_before == len(kept) and again.statuses == {DONE: 4}


def test_progress_counts_items_and_gives_an_eta(bench_data, store):
    from nemo_desktop.core.base.job_context import JobContext

    seen = []
    cfg = base_config(bench_data, datasets=base_config(bench_data)["datasets"][:1])
    BenchmarkRunner(parse_config(cfg), store, loader=doubles_loader(), ctx=JobContext(seen.append)).run()
    bench = [p for p in seen if p.stage == "Benchmark"]
    assert bench[0].done == 0 and bench[-1].done == bench[-1].total == 4
    assert any("samples/min" in p.message and "ETA" in p.message for p in bench)
    assert any("Indexing imagenet-r with ViT" in p.message for p in bench)  # sub-steps shown in the message
    assert any("Generating hypotheses" in p.message for p in bench)
    assert [p.done for p in bench] == sorted(p.done for p in bench)  # never goes backwards


def test_rescore_protocol_tests_the_first_editors_explanations_with_the_second(bench_data, store):
    """Table 3's "re-evaluate" reading: the second editor re-scores the explanations chosen with the first."""
    cfg = base_config(bench_data, datasets=[base_config(bench_data)["datasets"][2]], samples_per_dataset=2,
                      classifiers={"ViT": "test-double:coded-imagenet"}, judges={},
                      editors={"E1": "test-double:restoring-1", "E2": "test-double:restoring-2"},
                      editor_protocol="rescore")
    assert parse_config(cfg).run_id != parse_config({**cfg, "editor_protocol": "reselect"}).run_id
    with pytest.raises(ConfigError, match="editor_protocol"):
        parse_config({**cfg, "editor_protocol": "both"})
    s = run(cfg, store)
    assert s.complete and s.total == 2 * 2
    by_editor: dict[str, dict[str, dict]] = {}
    for it in store.run_items(s.run_id):
        cell, sample = it["item_id"].split("/", 1)
        by_editor.setdefault(cell.split("|")[3], {})[sample] = store.get(it["result_key"]).payload["result"]
    assert set(by_editor) == {"E1", "E2"} and by_editor["E1"].keys() == by_editor["E2"].keys()
    for sample, first in by_editor["E1"].items():
        second = by_editor["E2"][sample]
        assert second["explanation"] == first["explanation"] and len(second["candidates"]) == 1
        m = second["manifest"]
        assert m["rescored"] is True and m["models"]["editor"]["id"] == "test-double:restoring-2"
        assert m["source"]["editor"]["id"] == "test-double:restoring-1" and m["source"]["cei"] == first["cei"]
        assert second["cei"] is not None  # the second editor's own test of the same text
        assert not first["manifest"].get("rescored") and len(first["candidates"]) == 2  # SciTX's own M = 2
