from __future__ import annotations

import json
import os

import numpy as np
import pytest

from data_world import N_REFERENCE
from fixtures_tiny.digits_classifier import render_digit
from nemo_desktop.core.data.datasets import CsvManifestDataset, FolderDataset
from nemo_desktop.core.data.reference_index import ReferenceIndex, build_index, delete_index, index_id_for
from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.images import load_image
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.store.keys import content_hash


def _check_consistent(index: ReferenceIndex, classifier, sample: int = 40) -> None:
    """Every row agrees with running the classifier on the file at that row's path."""
    e = index.entries
    assert len(set(e.paths.tolist())) == len(e) == len(index.features)
    assert np.allclose(np.linalg.norm(index.features, axis=1), 1.0, atol=1e-5)
    rows = np.linspace(0, len(e) - 1, min(sample, len(e))).astype(int)
    images = [load_image(e.paths[r]) for r in rows]
    probs = classifier.predict_proba(images)
    assert np.allclose(index.features[rows], classifier.embed(images), atol=1e-5)
    assert np.array_equal(e.preds[rows], probs.argmax(1))
    assert np.allclose(e.prob_pred[rows], probs.max(1), atol=1e-6)
    assert np.allclose(e.prob_label[rows], probs[np.arange(len(rows)), e.labels[rows]], atol=1e-6)
    assert np.array_equal(e.correct, e.preds == e.labels)
    assert [content_hash(e.paths[r]) for r in rows] == e.sha256[rows].tolist()
    # Layout: correct references first, each part sorted by class, so every class's correct rows are a slice.
    n_correct = int(e.correct.sum())
    assert e.correct[:n_correct].all() and not e.correct[n_correct:].any()
    assert np.all(np.diff(e.labels[:n_correct]) >= 0) and np.all(np.diff(e.labels[n_correct:]) >= 0)


def test_build_indexes_every_image(digits_folder, fresh_classifier, store, digits):
    X, y = digits
    progress = []
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store, JobContext(on_progress=progress.append),
                        batch_size=64)
    assert len(index) == N_REFERENCE and index.features.shape == (N_REFERENCE, 32)
    assert isinstance(index.features, np.memmap)
    assert index.class_names == [str(i) for i in range(10)]
    assert index.last_build.processed == N_REFERENCE and fresh_classifier.images_seen == N_REFERENCE
    _check_consistent(index, fresh_classifier)
    # labels come from the folders (= the true digits); the MLP is good but not perfect
    by_name = {p.rsplit("/", 1)[-1]: lab for p, lab in zip(index.entries.paths, index.entries.labels)}
    assert all(by_name[f"digit_{i:05d}.png"] == y[i] for i in range(N_REFERENCE))
    assert 0.85 < index.accuracy < 1.0
    top = index.top5(0)
    assert len(top) == 5 and top[0][0] == index.entries.preds[0]
    assert [p.stage for p in progress if p.stage == "Indexing images"][-1] == "Indexing images"
    assert max(p.done for p in progress if p.stage == "Indexing images") == N_REFERENCE

    again = ReferenceIndex.load(store, index.index_id)
    assert np.array_equal(again.entries.paths, index.entries.paths)
    assert np.array_equal(np.asarray(again.features), np.asarray(index.features))
    assert index.index_id == index_id_for(digits_folder.resolve(), "test-double:digits-mlp",
                                          fresh_classifier.info.revision)
    listed = ReferenceIndex.list(store)
    assert listed[0]["index_id"] == index.index_id and listed[0]["entries"] == N_REFERENCE
    # only the published matrix and its entries sidecar stay on disk
    assert _array_files(store) == _published(store, index.index_id)


def _published(store, index_id):
    with store.transaction() as conn:
        matrix, meta = conn.execute("SELECT features_array, meta FROM indexes WHERE index_id=?", (index_id,)).fetchone()
    return {f"{matrix}.npy", f"{json.loads(meta)['entries_array']}.npy"}


def _array_files(store):
    return {p.name for p in store.arrays_dir.iterdir()}


def test_entries_sidecar_matches_the_table(digits_folder, fresh_classifier, store):
    """Loading reads the sidecar while it is current, the SQLite rows otherwise; both give the same index."""
    built = build_index(FolderDataset(digits_folder), fresh_classifier, store)
    with store.transaction() as conn:  # any write (here: a version bump as an errors-only batch makes) ...
        meta = json.loads(conn.execute("SELECT meta FROM indexes WHERE index_id=?", (built.index_id,)).fetchone()[0])
        meta["version"] += 1
        conn.execute("UPDATE indexes SET meta=? WHERE index_id=?", (json.dumps(meta), built.index_id))
    from nemo_desktop.core.data import reference_index as ri
    calls = []
    real = ri._entries_from_sidecar
    ri._entries_from_sidecar = lambda *a: calls.append(1) or real(*a)
    try:
        from_rows = ReferenceIndex.load(store, built.index_id)  # ... makes the sidecar stale: rows are read
        assert calls == []
        again = build_index(FolderDataset(digits_folder), fresh_classifier, store)  # refreshes the sidecar
        from_sidecar = ReferenceIndex.load(store, built.index_id)
        assert len(calls) >= 1
    finally:
        ri._entries_from_sidecar = real
    for field in ("paths", "sha256", "labels", "preds", "prob_label", "prob_pred", "correct"):
        a, b, c = (getattr(x.entries, field) for x in (built, from_rows, from_sidecar))
        assert np.array_equal(a, b) and np.array_equal(a, c), field
        assert a.dtype == c.dtype
    assert again.last_build.processed == 0 and _array_files(store) == _published(store, built.index_id)


def test_incremental_rebuilds_process_only_what_changed(digits_folder, fresh_classifier, store, digits):
    X, y = digits
    build_index(FolderDataset(digits_folder), fresh_classifier, store)

    fresh_classifier.images_seen = 0
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store)
    assert index.last_build.processed == 0 and fresh_classifier.images_seen == 0
    assert index.last_build.unchanged == N_REFERENCE

    fingerprint = index.fingerprint()
    assert ReferenceIndex.load(store, index.index_id).fingerprint() == fingerprint  # same content, same print

    # three new images
    for i in range(3):
        render_digit(X[1000 + i]).save(digits_folder / str(y[1000 + i]) / f"new_{i}.png")
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store)
    assert index.last_build.processed == 3 and fresh_classifier.images_seen == 3
    assert len(index) == N_REFERENCE + 3 and index.fingerprint() != fingerprint
    _check_consistent(index, fresh_classifier)

    # one image's content changes (another digit, same class folder): it alone is re-processed
    target = digits_folder / str(y[5]) / "digit_00005.png"
    render_digit(X[1500]).save(target)
    os.utime(target, (1e9, 1e9))
    fresh_classifier.images_seen = 0
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store)
    assert index.last_build.processed == 1 and fresh_classifier.images_seen == 1
    row = index.entries.paths.tolist().index(str(target))
    assert index.entries.sha256[row] == content_hash(target)
    _check_consistent(index, fresh_classifier)

    # touched but identical content: hashed, not re-processed
    os.utime(target, (2e9, 2e9))
    fresh_classifier.images_seen = 0
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store)
    assert index.last_build.processed == 0 and fresh_classifier.images_seen == 0

    # removed images are dropped, the matrix shrinks with them
    gone = digits_folder / "0" / "digit_00000.png"
    gone.unlink()
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store)
    assert index.last_build.removed == 1 and len(index) == N_REFERENCE + 2
    assert str(gone) not in set(index.entries.paths.tolist())
    _check_consistent(index, fresh_classifier)
    assert _array_files(store) == _published(store, index.index_id)


def test_cancel_keeps_completed_batches_and_rerun_resumes(digits_folder, fresh_classifier, store):
    token = CancelToken()

    def on_progress(p):
        if p.stage == "Indexing images" and p.done >= 64:
            token.cancel()

    with pytest.raises(JobCancelled) as err:
        build_index(FolderDataset(digits_folder), fresh_classifier, store, JobContext(on_progress, cancel=token),
                    batch_size=32)
    assert "64 of 300 images are indexed" in err.value.message and "again to resume" in err.value.message
    assert fresh_classifier.images_seen == 64

    partial = ReferenceIndex.load(store, index_id_for(digits_folder.resolve(), fresh_classifier.info.model_id,
                                                      fresh_classifier.info.revision))
    assert len(partial) == 64
    _check_consistent(partial, fresh_classifier)

    fresh_classifier.images_seen = 0
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store, batch_size=32)
    assert index.last_build.processed == N_REFERENCE - 64 and fresh_classifier.images_seen == N_REFERENCE - 64
    assert len(index) == N_REFERENCE
    _check_consistent(index, fresh_classifier)


class _DiesOnThirdBatch:
    """Wraps the digits classifier and fails like a killed process would: mid-run, nothing cleaned up."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0
        self.info, self.class_names, self.zero_shot = inner.info, inner.class_names, False

    def predict_proba(self, images, **kw):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("simulated crash")
        return self.inner.predict_proba(images, **kw)

    def embed(self, images):
        return self.inner.embed(images)


def test_crash_mid_run_keeps_committed_chunks(digits_folder, fresh_classifier, store):
    with pytest.raises(RuntimeError, match="simulated crash"):
        build_index(FolderDataset(digits_folder), _DiesOnThirdBatch(fresh_classifier), store, batch_size=50)
    chunks = [p.name for p in store.arrays_dir.iterdir()]
    assert len(chunks) == 2 and all("-chunk-" in c for c in chunks)

    index_id = index_id_for(digits_folder.resolve(), fresh_classifier.info.model_id, fresh_classifier.info.revision)
    loaded = ReferenceIndex.load(store, index_id)  # consolidates the two committed batches
    assert len(loaded) == 100
    _check_consistent(loaded, fresh_classifier)

    fresh_classifier.images_seen = 0
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store, batch_size=50)
    assert fresh_classifier.images_seen == N_REFERENCE - 100 and len(index) == N_REFERENCE
    _check_consistent(index, fresh_classifier)
    assert _array_files(store) == _published(store, index.index_id)


def test_orphan_chunk_of_a_killed_batch_is_never_read(digits_folder, fresh_classifier, store, digits):
    """A chunk saved just before a kill (rows never committed) must not shadow later rows."""
    build_index(FolderDataset(digits_folder), fresh_classifier, store, batch_size=50)
    index_id = index_id_for(digits_folder.resolve(), fresh_classifier.info.model_id, fresh_classifier.info.revision)
    # what a kill between "save chunk" and "commit rows" leaves: a chunk of garbage at the next free rows
    store.save_array(f"index-{index_id}-chunk-{N_REFERENCE:012d}", np.full((7, 32), 9.0, np.float32))
    with store.transaction() as conn:  # the reservation of its rows (it bumps the version too)
        meta = json.loads(conn.execute("SELECT meta FROM indexes WHERE index_id=?", (index_id,)).fetchone()[0])
        meta["next_row"] = N_REFERENCE + 7
        meta["version"] += 1
        conn.execute("UPDATE indexes SET meta=? WHERE index_id=?", (json.dumps(meta), index_id))
    removed = [digits_folder / "3" / f"digit_{i:05d}.png" for i in (3, 13)]
    with store.transaction() as conn:  # an entry removal committed (as build_index's step 3 does), then a kill
        for p in removed:
            p.unlink()
            conn.execute("DELETE FROM index_entries WHERE index_id=? AND path=?", (index_id, str(p)))
        meta = json.loads(conn.execute("SELECT meta FROM indexes WHERE index_id=?", (index_id,)).fetchone()[0])
        meta["version"] += 1
        conn.execute("UPDATE indexes SET meta=? WHERE index_id=?", (json.dumps(meta), index_id))
    loaded = ReferenceIndex.load(store, index_id)  # consolidates; the orphan chunk is left alone
    assert len(loaded) == N_REFERENCE - 2
    # five new images: their rows must not fall inside the orphan chunk's range
    for i in range(5):
        render_digit(digits[0][1200 + i]).save(digits_folder / str(digits[1][1200 + i]) / f"late_{i}.png")
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store, batch_size=50)
    assert index.last_build.processed == 5 and len(index) == N_REFERENCE + 3
    _check_consistent(index, fresh_classifier, sample=N_REFERENCE + 3)
    assert _array_files(store) == _published(store, index.index_id)


class _Renamed:
    """The same model (same id and revision) now reporting another vocabulary: the index must start over."""

    def __init__(self, inner, names):
        self.inner, self.class_names, self.info, self.zero_shot = inner, names, inner.info, False

    def predict_proba(self, images, **kw):
        return self.inner.predict_proba(images, **kw)

    def embed(self, images):
        return self.inner.embed(images)


def test_vocabulary_change_rebuilds_from_scratch(digits_folder, fresh_classifier, store, digits):
    X, y = digits
    build_index(FolderDataset(digits_folder), fresh_classifier, store, batch_size=32)
    for i in range(100):  # new images, then a crash while indexing them: two committed chunks stay behind
        render_digit(X[1000 + i]).save(digits_folder / str(y[1000 + i]) / f"extra_{i}.png")
    with pytest.raises(RuntimeError, match="simulated crash"):
        build_index(FolderDataset(digits_folder), _DiesOnThirdBatch(fresh_classifier), store, batch_size=32)
    assert sum("-chunk-" in name for name in _array_files(store)) == 2

    names = [f"digit {i}" for i in range(10)]
    dataset = FolderDataset(digits_folder).with_class_names(names, label_map={str(i): i for i in range(10)})
    index = build_index(dataset, _Renamed(fresh_classifier, names), store, batch_size=50)
    assert index.last_build.processed == N_REFERENCE + 100 and index.class_names == names
    _check_consistent(index, fresh_classifier, sample=N_REFERENCE + 100)
    assert _array_files(store) == _published(store, index.index_id)


def test_corrupt_image_is_recorded_and_skipped(digits_folder, fresh_classifier, store, digits):
    bad = digits_folder / "4" / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 20)
    empty = digits_folder / "4" / "empty.png"
    empty.write_bytes(b"")
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store, batch_size=16)
    assert len(index) == N_REFERENCE
    assert set(index.last_build.errors) == {str(bad), str(empty)} == set(index.errors)
    assert "empty" in index.errors[str(empty)]
    assert str(bad) not in set(index.entries.paths.tolist())
    _check_consistent(index, fresh_classifier)

    fresh_classifier.images_seen = 0
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store)
    assert index.last_build.processed == 0 and fresh_classifier.images_seen == 0  # not retried unchanged
    assert set(index.errors) == {str(bad), str(empty)}

    X, _ = digits
    render_digit(X[4]).save(bad)  # repaired: retried, indexed, no longer an error
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store)
    assert index.last_build.processed == 1 and set(index.errors) == {str(empty)}
    assert len(index) == N_REFERENCE + 1


def test_csv_label_change_reprocesses_that_row(tmp_path, digits_folder, fresh_classifier, store):
    files = sorted(digits_folder.rglob("*.png"))[:20]
    manifest = tmp_path / "refs.csv"
    rows = [(f.relative_to(tmp_path).as_posix(), f.parent.name) for f in files]
    manifest.write_text("path,label\n" + "".join(f"{p},{lab}\n" for p, lab in rows))
    index = build_index(CsvManifestDataset(manifest), fresh_classifier, store, batch_size=8)
    assert len(index) == 20 and index.dataset_root == str(manifest.resolve())

    manifest.write_text("path,label\n" + "".join(f"{p},{lab}\n" for p, lab in rows + rows[:3]))  # 3 listed twice
    fresh_classifier.images_seen = 0
    index = build_index(CsvManifestDataset(manifest), fresh_classifier, store, batch_size=8)
    assert fresh_classifier.images_seen == 0 and index.last_build.total == 20 and len(index) == 20

    rows[0] = (rows[0][0], "7" if rows[0][1] != "7" else "1")
    manifest.write_text("path,label\n" + "".join(f"{p},{lab}\n" for p, lab in rows))
    fresh_classifier.images_seen = 0
    index = build_index(CsvManifestDataset(manifest), fresh_classifier, store, batch_size=8)
    assert fresh_classifier.images_seen == 1
    r = index.entries.paths.tolist().index(str(files[0]))
    assert index.entries.labels[r] == int(rows[0][1]) and not index.entries.correct[r]
    _check_consistent(index, fresh_classifier)


def test_float16_matrix_and_delete(digits_folder, fresh_classifier, store):
    index = build_index(FolderDataset(digits_folder), fresh_classifier, store, feature_dtype="float16")
    assert index.features.dtype == np.float16
    delete_index(store, index.index_id)
    assert ReferenceIndex.list(store) == [] and not list(store.arrays_dir.iterdir())


def test_index_build_removes_the_temporary_file_of_a_write_killed_midway(digits_folder, fresh_classifier, store):
    from fixtures_tiny.killed_writer import kill_during_artifact_write

    left = kill_during_artifact_write(store.db_path, store.artifacts_dir)
    assert len(left) == 1
    build_index(FolderDataset(digits_folder), fresh_classifier, store, batch_size=64)
    assert not left[0].exists() and store.check() == []
