import hashlib
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.base.errors import StoreError
from nemo_desktop.core.store import ResultsStore, result_key
from nemo_desktop.core.store import maintenance


def gradient(w=32, h=24, shift=0):
    x = (np.arange(w * h * 3).reshape(h, w, 3) + shift) % 256
    return Image.fromarray(x.astype(np.uint8))


def artifact_files(store):
    return sorted(p for p in store.artifacts_dir.rglob("*") if p.is_file())


def test_round_trip_with_image_array_and_bytes(store):
    im = gradient()
    arr = np.linspace(0, 1, 60, dtype=np.float32).reshape(3, 20)
    key = result_key("caption", image_sha256="x", seed=0)
    put = store.put(key, "caption", {"text": "a dog on sand", "prob": 0.25, "nested": {"a": [1, 2]}},
                    {"input": im, "features": arr, "raw": b"\x00\x01raw"})
    got = store.get(key)
    assert got is not None and got.key == key and got.kind == "caption"
    assert got.payload == {"text": "a dog on sand", "prob": 0.25, "nested": {"a": [1, 2]}} == put.payload
    assert got.created_at == pytest.approx(put.created_at)
    assert set(got.artifacts) == {"input", "features", "raw"}
    assert got.artifacts == put.artifacts
    loaded = got.load_image("input")
    assert loaded.size == im.size and loaded.mode == "RGB"
    assert np.array_equal(np.asarray(loaded), np.asarray(im))
    np.testing.assert_array_equal(got.load_array("features"), arr)
    assert got.load_array("features").dtype == np.float32
    assert got.artifact_bytes("raw") == b"\x00\x01raw"
    # content-addressed: the file name is the sha256 of the file's bytes
    for p in got.artifacts.values():
        assert p.stem == hashlib.sha256(p.read_bytes()).hexdigest()
        assert p.parent.name == p.stem[:2]
    assert {p.suffix for p in got.artifacts.values()} == {".png", ".npy", ".bin"}
    assert store.has(key) and not store.has("nope") and store.get("nope") is None
    with pytest.raises(KeyError, match="no artifact 'missing'"):
        got.artifact_bytes("missing")


def test_identical_artifacts_are_stored_once_and_freed_with_their_last_user(store):
    im = gradient()
    store.put("k1", "caption", {}, {"input": im})
    store.put("k2", "caption", {}, {"input": gradient(), "other": b"xyz"})
    assert store.get("k1").artifacts["input"] == store.get("k2").artifacts["input"]
    assert len(artifact_files(store)) == 2
    store.delete("k1")
    assert store.get("k2").artifacts["input"].exists()  # still used by k2
    store.delete("k2")
    assert artifact_files(store) == []
    store.delete("k2")  # deleting a missing key is a no-op


def test_replacing_a_result_swaps_its_artifacts(store):
    first = store.put("k", "edit", {"v": 1}, {"edited": gradient(shift=1)})
    second = store.put("k", "edit", {"v": 2}, {"edited": gradient(shift=2)})
    assert store.get("k").payload == {"v": 2}
    assert not first.artifacts["edited"].exists()
    assert artifact_files(store) == [second.artifacts["edited"]]


def test_find_filters_and_orders_newest_first(store):
    for i in range(5):
        store.put(f"c{i}", "caption", {"i": i, "model": "a" if i % 2 else "b", "ok": i > 2, "note": None})
    store.put("h0", "hypotheses", {"i": 0, "model": "a"})
    assert [r.key for r in store.find("caption")] == ["c4", "c3", "c2", "c1", "c0"]
    assert [r.key for r in store.find("caption", limit=2)] == ["c4", "c3"]
    assert [r.key for r in store.find()][:2] == ["h0", "c4"]
    assert [r.key for r in store.find("caption", model="a")] == ["c3", "c1"]
    assert [r.key for r in store.find(model="a", i=0)] == ["h0"]
    assert [r.key for r in store.find("caption", ok=True)] == ["c4", "c3"]
    assert [r.key for r in store.find("caption", i=1.0)] == ["c1"]
    assert len(store.find("caption", note=None)) == 5
    assert store.find("caption", model="zzz") == []
    with pytest.raises(ValueError):
        store.find(**{"a'); DROP TABLE results; --": 1})


def test_clear_by_kind_removes_rows_and_their_files(store):
    store.put("a", "caption", {}, {"x": b"only-a"})
    store.put("b", "edit", {}, {"x": b"only-b"})
    assert store.clear("caption") == 1
    assert store.get("a") is None and store.get("b") is not None
    assert len(artifact_files(store)) == 1
    assert store.clear() == 1
    assert artifact_files(store) == [] and store.info()["results"] == 0


def test_bad_payloads_and_artifacts_are_refused_before_anything_is_written(store):
    with pytest.raises(ValueError, match="NaN"):
        store.put("k", "x", {"cei": float("nan")}, {"a": b"data"})
    with pytest.raises(TypeError, match="artifact 'a'"):
        store.put("k", "x", {}, {"a": 3.5})
    with pytest.raises(TypeError):
        store.put("k", "x", ["not", "a", "dict"])
    assert not store.has("k") and artifact_files(store) == []
    # numpy scalars (typical classifier outputs) are stored as plain numbers
    store.put("k", "x", {"prob": np.float32(0.5), "idx": np.int64(3)})
    assert store.get("k").payload == {"prob": 0.5, "idx": 3}


def test_runs_api(store):
    run = store.create_run("benchmark", {"dataset": "imagenet-r", "n": 3})
    assert store.get_run(run) == {"run_id": run, "kind": "benchmark", "config": {"dataset": "imagenet-r", "n": 3},
                                  "created_at": pytest.approx(store.get_run(run)["created_at"]), "status": "created"}
    other = store.create_run("batch", {}, run_id="my-run")
    assert other == "my-run"
    with pytest.raises(StoreError, match="already exists"):
        store.create_run("batch", {}, run_id="my-run")
    assert [r["run_id"] for r in store.list_runs()] == ["my-run", run]
    assert [r["run_id"] for r in store.list_runs("benchmark")] == [run]
    store.set_run_status(run, "running")
    assert store.get_run(run)["status"] == "running"
    with pytest.raises(StoreError, match="no run"):
        store.set_run_status("ghost", "done")

    store.add_run_item(run, "img1", "key1", "done")
    store.add_run_item(run, "img2", None, "failed", {"type": "OutOfMemoryError", "message": "CUDA OOM"})
    store.add_run_item(run, "img1", "key1b", "done")  # upsert keeps position, updates fields
    items = store.run_items(run)
    assert [(i["item_id"], i["result_key"], i["status"]) for i in items] == [("img1", "key1b", "done"),
                                                                            ("img2", None, "failed")]
    assert items[1]["error"] == {"type": "OutOfMemoryError", "message": "CUDA OOM"}
    assert items[0]["error"] is None and items[0]["updated_at"] > 0
    with pytest.raises(StoreError, match="no run"):
        store.add_run_item("ghost", "img", None, "done")
    store.delete_run(run)
    assert store.get_run(run) is None and store.run_items(run) == []


def test_check_detects_deleted_and_tampered_artifacts(store):
    a = store.put("a", "edit", {}, {"img": gradient(shift=3)})
    b = store.put("b", "edit", {}, {"arr": np.ones(5)})
    c = store.put("c", "edit", {}, {"raw": b"fine"})
    assert store.check() == []
    a.artifacts["img"].unlink()
    b.artifacts["arr"].write_bytes(b"tampered")
    problems = store.check()
    assert len(problems) == 2, problems
    missing = [p for p in problems if p.startswith(maintenance.PROBLEM_MISSING)]
    corrupt = [p for p in problems if p.startswith(maintenance.PROBLEM_CORRUPT)]
    assert len(missing) == 1 and str(a.artifacts["img"]) in missing[0] and "result " + "a" in missing[0]
    assert len(corrupt) == 1 and str(b.artifacts["arr"]) in corrupt[0]
    assert store.get("c").artifact_bytes("raw") == b"fine"
    # leftovers are reported and tidied up; referenced files are never touched by cleanup
    (store.artifacts_dir / "ab").mkdir(exist_ok=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    crashed_tmp = store.artifacts_dir / "ab" / f".x.npy.{dead.pid}-0a1b.tmp"  # its writer is gone
    live_tmp = store.artifacts_dir / "ab" / f".y.npy.{os.getpid()}-0a1b.tmp"  # its writer is still running
    for t in (crashed_tmp, live_tmp):
        t.write_bytes(b"partial")
    orphan = store.artifacts_dir / "cd" / ("cd" + "0" * 62 + ".bin")
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"nobody")
    kinds = sorted(p.split(":")[0] for p in store.check())
    assert kinds == sorted([maintenance.PROBLEM_MISSING, maintenance.PROBLEM_CORRUPT, maintenance.PROBLEM_TMP, maintenance.PROBLEM_TMP,
                            maintenance.PROBLEM_ORPHAN])
    assert store.cleanup() == {"tmp": 1, "orphans": 1}
    assert not crashed_tmp.exists() and not orphan.exists() and c.artifacts["raw"].exists()
    [folder] = store.quarantine_folders()  # the orphan is moved to the quarantine, not deleted
    assert (folder.path / "cd" / orphan.name).read_bytes() == b"nobody" and folder.files == 1
    assert live_tmp.exists()  # could be a write in progress in this process
    assert store.cleanup_tmp(stale_after_s=0) == 1 and not live_tmp.exists()


def test_check_reports_a_damaged_database_page(store, db_path):
    for i in range(300):
        store.put(f"k{i}", "x", {"text": "y" * 200})
    store.close()
    con = sqlite3.connect(db_path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    raw = bytearray(db_path.read_bytes())
    page = 4096
    for off in range(page * 2, page * 2 + 64):  # scribble over page 3's b-tree header; page 1 stays intact
        raw[off] = 0x5A
    db_path.write_bytes(bytes(raw))
    s = ResultsStore.open(db_path=db_path)
    try:
        problems = s.check()
        assert problems and all(p.startswith(maintenance.PROBLEM_DATABASE) for p in problems)
    finally:
        s.close()


def test_info_counts_rows_artifacts_and_runs(store):
    store.put("a", "caption", {}, {"x": b"12345"})
    store.put("b", "caption", {}, {"x": b"12345"})
    store.put("c", "edit", {}, {"y": b"1234567890"})
    store.create_run("batch", {})
    store.save_array("feats", np.zeros((4, 4), np.float32))
    info = store.info()
    assert info["results"] == 3 and info["rows_per_kind"] == {"caption": 2, "edit": 1}
    assert info["artifact_files"] == 2 and info["artifact_bytes"] == 15
    assert info["runs"] == 1 and info["arrays"] == 1 and info["schema_version"] >= 1
    assert info["journal_mode"] == "wal" and info["recovered_from"] is None


def test_arrays_are_saved_atomically_and_memory_mapped(store):
    arr = np.random.default_rng(0).standard_normal((100, 8)).astype(np.float32)
    p = store.save_array("index-abc.features", arr)
    assert p == store.array_path("index-abc.features") == store.store_dir / "arrays" / "index-abc.features.npy"
    m = store.open_array("index-abc.features")
    assert isinstance(m, np.memmap) and not m.flags.writeable
    np.testing.assert_array_equal(m, arr)
    store.save_array("index-abc.features", arr[:10])
    assert store.open_array("index-abc.features", mmap=False).shape == (10, 8)
    assert [x.name for x in store.arrays_dir.iterdir()] == ["index-abc.features.npy"]
    for bad in ("../escape", "a/b", "", ".hidden", "x.tmp"):
        with pytest.raises(ValueError):
            store.array_path(bad)
    with pytest.raises(StoreError, match="missing"):
        store.open_array("nothing-here")
    with pytest.raises(ValueError):  # object arrays would need pickle
        store.save_array("obj", np.array([{"a": 1}], dtype=object))
    assert not store.array_path("obj").exists()


def test_transaction_commits_or_rolls_back(store):
    with store.transaction() as conn:
        conn.execute("INSERT INTO indexes(index_id, feature_dim) VALUES ('i1', 8)")
        with store.transaction() as inner:  # nested: a savepoint
            inner.execute("INSERT INTO index_entries(index_id, path, label) VALUES ('i1', 'a.png', 3)")
    with pytest.raises(RuntimeError):
        with store.transaction() as conn:
            conn.execute("INSERT INTO indexes(index_id, feature_dim) VALUES ('i2', 8)")
            raise RuntimeError("boom")
    with pytest.raises(RuntimeError):
        with store.transaction() as conn:
            conn.execute("INSERT INTO indexes(index_id) VALUES ('i3')")
            with store.transaction() as inner:
                inner.execute("INSERT INTO indexes(index_id) VALUES ('i4')")
                raise RuntimeError("inner fails, outer does not catch")
    with store.transaction() as conn:
        ids = [r[0] for r in conn.execute("SELECT index_id FROM indexes ORDER BY index_id")]
        assert ids == ["i1"]
        assert conn.execute("SELECT label FROM index_entries").fetchall() == [(3,)]


def test_closed_store_says_so(db_path):
    s = ResultsStore.open(db_path=db_path)
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.get("k")


def test_store_is_usable_from_several_threads(store):
    import threading

    errors = []

    def work(t):
        try:
            for i in range(30):
                store.put(f"t{t}-{i}", "x", {"t": t}, {"b": f"{t}-{i}".encode()})
                assert store.get(f"t{t}-{i}") is not None
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and store.info()["results"] == 120 and store.check() == []


def test_check_reports_its_progress_and_can_be_cancelled(store):
    from nemo_desktop.core.base.errors import JobCancelled
    from nemo_desktop.core.base.job_context import CancelToken, JobContext

    for i in range(3):
        store.put(f"r{i}", "edit", {}, {"raw": f"file {i}".encode()})
    seen = []
    assert store.check(JobContext(lambda p: seen.append((p.stage, p.done, p.total)))) == []
    assert seen[0] == (maintenance.CHECK_STAGE, 0, 3) and seen[-1] == (maintenance.CHECK_STAGE, 3, 3)
    token = CancelToken()
    token.cancel()
    with pytest.raises(JobCancelled):
        store.check(JobContext(lambda p: None, cancel=token))
