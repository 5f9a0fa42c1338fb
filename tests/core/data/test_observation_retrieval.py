from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from data_world import unit_rows
from nemo_desktop.core.data.datasets import FolderDataset
from nemo_desktop.core.data.reference_index import IndexEntries, ReferenceIndex, build_index
from nemo_desktop.core.data.retrieval import retrieve_observations
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.images import load_image


def brute_force(index, q, mask, k):
    """Reference answer: every similarity, stable sort (ties by row), first k rows passing `mask`."""
    s = np.asarray(index.features, np.float32) @ (q / np.linalg.norm(q))
    order = sorted(np.flatnonzero(mask).tolist(), key=lambda r: (-s[r], r))
    return order[:k]


def rows_of(result, set_name, index):
    where = {p: i for i, p in enumerate(index.entries.paths.tolist())}
    return [where[o.image_path] for o in result.by_set(set_name)]


@pytest.fixture
def digits_index(digits_folder, fresh_classifier, store):
    return build_index(FolderDataset(digits_folder), fresh_classifier, store, batch_size=100)


def test_sets_a_b_c_on_a_real_index(digits_index, fresh_classifier):
    e = digits_index.entries
    wrong = np.flatnonzero(~e.correct)
    assert len(wrong) >= 3  # the digits MLP makes real mistakes to explain
    for query in wrong[:3].tolist():
        y, y_hat, sha = int(e.labels[query]), int(e.preds[query]), e.sha256[query]
        q = fresh_classifier.embed([load_image(e.paths[query])])[0]
        res = retrieve_observations(digits_index, q, y, y_hat, k=4, query_sha256=sha)
        a, b, c = (rows_of(res, s, digits_index) for s in "ABC")
        assert len(a) == len(b) == len(c) == 4 and res.notes == []
        assert all(e.labels[r] == y and e.correct[r] for r in a)
        assert all(e.labels[r] == y_hat and e.correct[r] for r in b)
        assert all(e.labels[r] not in (y, y_hat) and e.correct[r] for r in c)
        not_query = e.sha256 != sha
        assert a == brute_force(digits_index, q, e.correct & (e.labels == y) & not_query, 4)
        assert b == brute_force(digits_index, q, e.correct & (e.labels == y_hat) & not_query, 4)
        sims = [o.similarity for o in res.by_set("A")]
        assert sims == sorted(sims, reverse=True)
        assert all(o.label_name == str(o.label_index) for o in res)
        assert query not in a + b + c


def test_query_itself_is_excluded_by_content(digits_index, fresh_classifier):
    e = digits_index.entries
    query = int(np.flatnonzero(e.correct)[0])  # a correct reference: it would be its own nearest neighbour
    q = np.asarray(digits_index.features[query])
    y = int(e.labels[query])
    other = (y + 1) % 10
    with_self = retrieve_observations(digits_index, q, y, other, k=2)
    assert rows_of(with_self, "A", digits_index)[0] == query
    assert with_self.by_set("A")[0].similarity == pytest.approx(1.0, abs=1e-5)
    without = retrieve_observations(digits_index, q, y, other, k=2, query_sha256=e.sha256[query])
    assert query not in rows_of(without, "A", digits_index) + rows_of(without, "C", digits_index)


def test_ablation_drops_the_class_filter(digits_index, fresh_classifier):
    """Table 5's 'Correctness + Semantic Similarity': nearest correct references of any class, plus random."""
    e = digits_index.entries
    query = int(np.flatnonzero(~e.correct)[0])
    q = fresh_classifier.embed([load_image(e.paths[query])])[0]
    sha = e.sha256[query]
    res = retrieve_observations(digits_index, q, int(e.labels[query]), int(e.preds[query]), k_true=3, k_pred=2,
                                k_random=4, class_relevance=False, query_sha256=sha)
    assert {o.set_name for o in res} == {"S", "C"}
    s, c = rows_of(res, "S", digits_index), rows_of(res, "C", digits_index)
    assert s == brute_force(digits_index, q, e.correct & (e.sha256 != sha), 5)
    assert len(c) == 4 and not set(c) & set(s) and all(e.correct[r] for r in c)
    assert res.params["class_relevance"] is False
    # Only the class filter differs: Set C comes from the method's pool (correct, of classes other than y and
    # ŷ), less the similar set.
    y, y_hat = int(e.labels[query]), int(e.preds[query])
    assert all(e.labels[r] not in (y, y_hat) for r in c)


def test_pooled_k_is_the_nearest_of_both_classes(digits_index, fresh_classifier):
    e = digits_index.entries
    for query in np.flatnonzero(~e.correct)[:3].tolist():
        y, y_hat, sha = int(e.labels[query]), int(e.preds[query]), e.sha256[query]
        q = fresh_classifier.embed([load_image(e.paths[query])])[0]
        res = retrieve_observations(digits_index, q, y, y_hat, k_true=6, k_pred=0, k_random=0, pooled=True,
                                    query_sha256=sha)
        both = e.correct & np.isin(e.labels, [y, y_hat]) & (e.sha256 != sha)
        nearest = brute_force(digits_index, q, both, 6)
        a, b = rows_of(res, "A", digits_index), rows_of(res, "B", digits_index)
        assert sorted(a + b) == sorted(nearest) and not res.by_set("C")
        assert all(e.labels[r] == y for r in a) and all(e.labels[r] == y_hat for r in b)
        assert res.params["pooled"] is True
        per_set = retrieve_observations(digits_index, q, y, y_hat, k_true=6, k_pred=0, k_random=0, query_sha256=sha)
        assert rows_of(per_set, "A", digits_index) == brute_force(digits_index, q, both & (e.labels == y), 6)


def test_k_random_zero_is_algorithm_1(digits_index):
    q = np.asarray(digits_index.features[0])
    res = retrieve_observations(digits_index, q, 1, 2, k=3, k_random=0, query_sha256="ab" * 32)
    assert {o.set_name for o in res} == {"A", "B"} and len(res) == 6 and res.notes == []


def test_random_set_is_seeded(digits_index):
    q = np.asarray(digits_index.features[0])
    runs = [rows_of(retrieve_observations(digits_index, q, 1, 2, k=5, seed=s, query_sha256="ab" * 32), "C",
                    digits_index) for s in (0, 0, 1)]
    assert runs[0] == runs[1] and runs[0] != runs[2]
    other_query = rows_of(retrieve_observations(digits_index, q, 1, 2, k=5, seed=0, query_sha256="cd" * 32), "C",
                          digits_index)
    assert other_query != runs[0]  # the query's hash varies the random set across queries
    anywhere = retrieve_observations(digits_index, q, 1, 2, k=3, k_random=100, seed=0,
                                     random_from_other_classes=False)
    labels = {o.label_index for o in anywhere.by_set("C")}
    assert labels & {1, 2}  # 100 draws from all classes hit y or ŷ...
    a_b = set(rows_of(anywhere, "A", digits_index) + rows_of(anywhere, "B", digits_index))
    assert not a_b & set(rows_of(anywhere, "C", digits_index))  # ...but never repeat A or B


def _synthetic_index(n=5000, d=24, classes=7, dtype=np.float32, seed=0, correct_rate=0.8):
    rng = np.random.default_rng(seed)
    feats = unit_rows(rng, n, d)
    labels = np.sort(rng.integers(0, classes, n))
    correct = rng.random(n) < correct_rate
    preds = np.where(correct, labels, (labels + 1) % classes)
    order = np.lexsort((labels, ~correct))  # the index's layout: correct rows first, by class
    feats, labels, correct, preds = feats[order], labels[order], correct[order], preds[order]
    entries = IndexEntries(np.array([f"/refs/{i}.png" for i in range(n)], object),
                           np.array([hashlib.sha256(b"%d" % i).hexdigest() for i in range(n)], object), labels, preds,
                           np.ones(n, np.float32), np.ones(n, np.float32), correct)
    return ReferenceIndex("synthetic", [f"c{i}" for i in range(classes)], entries, feats.astype(dtype))


@pytest.mark.parametrize("dtype,chunk", [(np.float32, 65536), (np.float32, 97), (np.float16, 333)])
def test_chunked_top_k_matches_brute_force(dtype, chunk):
    index = _synthetic_index(dtype=dtype)
    e = index.entries
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = rng.standard_normal(index.feature_dim).astype(np.float32)
        y, y_hat = rng.choice(7, 2, replace=False).tolist()
        res = retrieve_observations(index, q, y, y_hat, k=9, chunk_rows=chunk)
        assert rows_of(res, "A", index) == brute_force(index, q, e.correct & (e.labels == y), 9)
        assert rows_of(res, "B", index) == brute_force(index, q, e.correct & (e.labels == y_hat), 9)
        abl = retrieve_observations(index, q, y, y_hat, k=9, chunk_rows=chunk, class_relevance=False)
        assert rows_of(abl, "S", index) == brute_force(index, q, e.correct, 18)
    # sparse candidate rows (gather path): a class whose correct rows are scattered
    index.entries.correct[:] = False
    index.entries.correct[::50] = True
    res = retrieve_observations(index, q, 0, 1, k=3, chunk_rows=chunk, class_relevance=False)
    assert rows_of(res, "S", index) == brute_force(index, q, index.entries.correct, 6)


def test_content_hash_lookup_confirms_the_full_hash():
    index = _synthetic_index(n=50)
    sha = index.entries.sha256
    sha[7] = sha[4]  # the same image twice
    sha[9] = sha[4][:15] + "f" * 49  # same 60-bit prefix, different image
    assert index.rows_with_sha(sha[4]) == [4, 7]
    assert index.rows_with_sha("0" * 64) == [] and index.rows_with_sha("not hex") == []
    res = retrieve_observations(index, np.asarray(index.features[4]), int(index.entries.labels[4]),
                                (int(index.entries.labels[4]) + 1) % 7, k=50, k_random=50, query_sha256=sha[4])
    paths = {o.image_path for o in res}
    assert index.entries.paths[4] not in paths and index.entries.paths[7] not in paths
    assert index.entries.paths[9] in paths or not index.entries.correct[9]


def test_ties_are_broken_by_row():
    index = _synthetic_index(n=400)
    index.features[:] = index.features[0]  # every reference equally similar
    e = index.entries
    res = retrieve_observations(index, np.asarray(index.features[0]), 2, 3, k=5, chunk_rows=50)
    assert rows_of(res, "A", index) == np.flatnonzero(e.correct & (e.labels == 2))[:5].tolist()


def test_empty_and_short_sets_are_explained():
    index = _synthetic_index(n=300)
    e = index.entries
    e.correct[e.labels == 3] = False  # nothing of class 3 is classified correctly
    keep = np.flatnonzero(e.correct & (e.labels == 4))[:2]
    e.correct[e.labels == 4] = False
    e.correct[keep] = True  # only two correct references of class 4
    q = np.asarray(index.features[0])
    res = retrieve_observations(index, q, 4, 3, k=3)
    assert res.by_set("B") == [] and len(res.by_set("A")) == 2 and len(res.by_set("C")) == 3
    assert "no correctly classified reference of the predicted class 'c3'" in res.notes
    assert "only 2 correctly classified references of the true class 'c4' (3 requested)" in res.notes

    same = retrieve_observations(index, q, "c4", "c4", k=3)
    assert same.by_set("B") == [] and any("set B is left empty" in n for n in same.notes)

    e.correct[:] = False
    nothing = retrieve_observations(index, q, 0, 1, k=3)
    assert nothing.observations == [] and len(nothing.notes) == 3
    assert "no correctly classified reference for the random set C" in nothing.notes[-1] or \
        "of another class" in nothing.notes[-1]


def test_bad_inputs_raise_clear_errors():
    index = _synthetic_index(n=100, d=8)
    with pytest.raises(ConfigError, match="8"):
        retrieve_observations(index, np.ones(5), 0, 1)
    with pytest.raises(ConfigError, match="not one of"):
        retrieve_observations(index, np.ones(8), "zebra", 1)
    with pytest.raises(ConfigError, match="outside"):
        retrieve_observations(index, np.ones(8), 0, 99)
    empty = ReferenceIndex("e", ["a", "b"], IndexEntries.empty(), np.zeros((0, 8), np.float32))
    assert retrieve_observations(empty, np.ones(8), 0, 1).notes == ["the reference index is empty: no observations"]


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU (checked without importing torch)")
def test_gpu_scoring_matches_cpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    index = _synthetic_index()
    q = np.random.default_rng(3).standard_normal(index.feature_dim).astype(np.float32)
    cpu = retrieve_observations(index, q, 1, 2, k=5)
    gpu = retrieve_observations(index, q, 1, 2, k=5, device="cuda")
    assert [o.image_path for o in cpu.by_set("A")] == [o.image_path for o in gpu.by_set("A")]
