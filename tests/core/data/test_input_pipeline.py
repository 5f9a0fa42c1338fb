"""The indexing input pipeline: decode/hash/preprocess on workers ahead of the model, in order, per-file
errors, cancel and resume as before, bounded memory whatever the dataset size, JPEG draft decoding, and the
GPU fast-path rules (pure selection logic, tested without a GPU)."""
from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.data.datasets import FolderDataset
from nemo_desktop.core.data.input_pipeline import BatchLoader, LoaderSettings, draft_side_for
from nemo_desktop.core.data.reference_index import ReferenceIndex, build_index, index_id_for
from nemo_desktop.core.base.errors import ConfigError, JobCancelled
from nemo_desktop.core.base.images import load_image
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.models.fast_paths import FastPaths, host_to_device, select_fast_paths
from nemo_desktop.core.models.outputs import ClassifierOutputs
from nemo_desktop.core.models.protocols import ModelInfo
from nemo_desktop.core.store.keys import content_hash


def _decode_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("nemo-decode")]


class TrackingClassifier:
    """A classifier with the tensor-level one-pass path (prepare_batch on workers, outputs_from_pixels on the
    model) whose prepared batches are tracked with weakref finalizers: `peak_live` is the most prepared
    (decoded) batches alive at once, measured on the objects themselves, not on the loader's bookkeeping."""

    zero_shot = False
    info = ModelInfo("test-double:mean-colour", "test-double", "1")
    class_names = ["dark", "light"]

    def __init__(self) -> None:
        self.live = self.peak_live = self.batches = 0
        self._lock = threading.Lock()

    def prepare_batch(self, images):
        arr = np.stack([np.asarray(im.resize((8, 8)), np.float32).mean(axis=(0, 1)) / 255.0 for im in images])
        with self._lock:
            self.live += 1
            self.peak_live = max(self.peak_live, self.live)
        weakref.finalize(arr, self._freed)
        return arr

    def _freed(self) -> None:
        with self._lock:
            self.live -= 1

    def to_device(self, host):
        return host

    def outputs_from_pixels(self, x) -> ClassifierOutputs:
        self.batches += 1
        light = x.mean(axis=1, keepdims=True)
        logits = np.concatenate([1 - light, light], axis=1).astype(np.float32) * 4
        e = np.exp(logits - logits.max(1, keepdims=True))
        return ClassifierOutputs(logits, (e / e.sum(1, keepdims=True)).astype(np.float32),
                                 (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))

    # the image-level protocol, for the sequential reference computation
    def predict_with_embeddings(self, images):
        out = self.outputs_from_pixels(self.prepare_batch(images))
        return out.probs, out.embeddings


def _colour_folder(root, n: int, side: int = 6):
    rng = np.random.default_rng(0)
    for i in range(n):
        folder = root / ("dark" if i % 2 else "light")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8)).save(folder / f"im_{i:05d}.png")
    return root


def test_batches_come_in_input_order_with_errors_per_file(tmp_path, digits_folder):
    files = sorted(digits_folder.rglob("*.png"))[:40]
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 20)
    missing = tmp_path / "missing.png"
    items = files[:7] + [broken] + files[7:23] + [missing] + files[23:]
    loader = BatchLoader(items, 5, workers=3, ahead=2)
    seen, errors = [], []
    for batch in loader:
        assert len(batch.items) + len(batch.errors) <= 5
        seen += batch.items
        errors += batch.errors
        assert [content_hash(p) for p in batch.items] == batch.sha256
        assert all(a.tobytes() == load_image(p).tobytes() for p, a in zip(batch.items, batch.images))
    assert seen == files  # order kept, whichever worker finished first
    assert [p for p, _ in errors] == [broken, missing]
    for path, reason in errors:  # the same reason a plain decode gives
        with pytest.raises(Exception) as exc:
            load_image(path)
        assert reason == (getattr(exc.value, "message", None) or f"{type(exc.value).__name__}: {exc.value}")
    assert loader.stats.live == 0 and not _decode_threads()


def test_index_equals_a_sequential_one_pass_computation(tmp_path, store):
    root = _colour_folder(tmp_path / "colours", 45)
    clf = TrackingClassifier()
    index = build_index(FolderDataset(root), clf, store, batch_size=4,
                        loading=LoaderSettings(workers=3, ahead=2))
    assert len(index) == 45 and clf.batches == 12
    e = index.entries
    probs, feats = clf.predict_with_embeddings([load_image(p) for p in e.paths])
    assert np.array_equal(e.preds, probs.argmax(1))
    np.testing.assert_allclose(e.prob_pred, probs.max(1), atol=1e-6)
    np.testing.assert_allclose(index.features, feats, atol=1e-6)
    assert e.sha256.tolist() == [content_hash(p) for p in e.paths]


def test_worker_count_does_not_change_the_index(digits_folder, fresh_classifier, tmp_path):
    """The image-level path (a classifier without prepare_batch) through 1 and 4 workers: identical indexes."""
    from nemo_desktop.core.store import ResultsStore

    built = []
    for workers in (1, 4):
        with ResultsStore.open(db_path=tmp_path / f"s{workers}" / "r.sqlite") as s:
            idx = build_index(FolderDataset(digits_folder), fresh_classifier, s, batch_size=16,
                              loading=LoaderSettings(workers=workers, ahead=workers))
            built.append((idx.entries.paths.tolist(), idx.entries.preds.copy(), np.array(idx.features)))
    assert built[0][0] == built[1][0] and np.array_equal(built[0][1], built[1][1])
    assert np.array_equal(built[0][2], built[1][2])


def test_memory_stays_bounded_on_a_large_folder(tmp_path, store):
    """2,000 files in batches of 8: at most ahead + 2 prepared batches are ever alive (the ones decoded ahead,
    the one the model is on, the one whose rows are being committed), however many batches the folder has."""
    root = _colour_folder(tmp_path / "large", 2000, side=4)
    clf = TrackingClassifier()
    index = build_index(FolderDataset(root), clf, store, batch_size=8, loading=LoaderSettings(workers=2, ahead=2))
    assert len(index) == 2000 and clf.batches == 250
    assert 1 <= clf.peak_live <= 2 + 2
    assert clf.live == 0 and not _decode_threads()


def test_cancel_between_batches_stops_the_workers_and_a_rerun_resumes(tmp_path, store):
    root = _colour_folder(tmp_path / "colours", 60)
    clf = TrackingClassifier()
    token = CancelToken()

    def on_progress(p):
        if p.stage == "Indexing images" and p.done >= 20:
            token.cancel()

    with pytest.raises(JobCancelled) as err:
        build_index(FolderDataset(root), clf, store, JobContext(on_progress, cancel=token), batch_size=10,
                    loading=LoaderSettings(workers=3, ahead=3))
    assert "20 of 60 images are indexed" in err.value.message
    assert clf.batches == 2 and not _decode_threads()
    partial = ReferenceIndex.load(store, index_id_for(root.resolve(), clf.info.model_id, clf.info.revision))
    assert len(partial) == 20

    clf.batches = 0
    index = build_index(FolderDataset(root), clf, store, batch_size=10, loading=LoaderSettings(workers=3))
    assert index.last_build.processed == 40 and clf.batches == 4 and len(index) == 60


def test_an_error_in_the_model_stops_the_workers(tmp_path, store):
    root = _colour_folder(tmp_path / "colours", 40)

    class Fails(TrackingClassifier):
        def outputs_from_pixels(self, x):
            if self.batches == 1:
                raise RuntimeError("simulated model failure")
            return super().outputs_from_pixels(x)

    with pytest.raises(RuntimeError, match="simulated model failure"):
        build_index(FolderDataset(root), Fails(), store, batch_size=4, loading=LoaderSettings(workers=2, ahead=4))
    assert not _decode_threads()


# -- JPEG draft decoding -----------------------------------------------------------------------------------

def _jpeg(path, size):
    rng = np.random.default_rng(1)
    small = rng.integers(0, 255, (size[1] // 16, size[0] // 16, 3), dtype=np.uint8)
    Image.fromarray(small).resize(size, Image.Resampling.BICUBIC).save(path, quality=90)
    return path


def test_draft_decoding_only_shrinks_files_much_larger_than_the_input(tmp_path):
    big = _jpeg(tmp_path / "big.jpg", (2000, 1500))
    usual = _jpeg(tmp_path / "usual.jpg", (500, 375))

    class Clf:
        input_side = 224

    side = draft_side_for(Clf(), 2.0)
    assert side == 448 and draft_side_for(Clf(), 0) is None and draft_side_for(object(), 2.0) is None
    drafted = load_image(big, draft_side=side)
    assert drafted.size == (1000, 750) and min(drafted.size) >= side  # 1/2 scale: both sides stay >= 448
    assert load_image(usual, draft_side=side).tobytes() == load_image(usual).tobytes()  # decoded as before
    # what the classifier then sees: the drafted file resized to its input is close to the full decode's
    full = np.asarray(load_image(big).resize((224, 168), Image.Resampling.BICUBIC), np.float32)
    fast = np.asarray(drafted.resize((224, 168), Image.Resampling.BICUBIC), np.float32)
    assert np.abs(full - fast).mean() < 2.0


def test_loader_settings_are_checked():
    with pytest.raises(ConfigError):
        LoaderSettings(workers=0)
    with pytest.raises(ConfigError):
        LoaderSettings(draft_factor=0.5)
    assert LoaderSettings(draft_factor=0).draft_factor == 0


# -- GPU fast paths (selection rules; no GPU needed) -----------------------------------------------------------

def test_fast_paths_are_off_on_the_cpu():
    assert select_fast_paths("cpu", "float32", bf16_supported=True, convolutional=True, autocast="bf16") == FastPaths()


def test_fast_paths_on_cuda_follow_the_model_and_the_gpu():
    cnn = select_fast_paths("cuda", "bfloat16", bf16_supported=True, convolutional=True)
    assert cnn == FastPaths(pin_memory=True, non_blocking=True, channels_last=True, autocast_bf16=False)
    vit = select_fast_paths("cuda:0", "bfloat16", bf16_supported=True, convolutional=False)
    assert vit.pin_memory and vit.non_blocking and not vit.channels_last
    # bf16 autocast: asked for, supported by the GPU, and only over float32 weights
    assert select_fast_paths("cuda", "float32", bf16_supported=True, convolutional=False, autocast="bf16").autocast_bf16
    assert not select_fast_paths("cuda", "float32", bf16_supported=False, convolutional=False,
                                 autocast="bf16").autocast_bf16
    assert not select_fast_paths("cuda", "float16", bf16_supported=True, convolutional=False,
                                 autocast="bf16").autocast_bf16
    assert not select_fast_paths("cuda", "float32", bf16_supported=True, convolutional=False).autocast_bf16
    with pytest.raises(ConfigError):
        select_fast_paths("cuda", "float32", bf16_supported=True, convolutional=False, autocast="fp8")


def test_fast_paths_helpers_on_the_cpu():
    torch = pytest.importorskip("torch")
    x = torch.zeros(2, 3, 4, 4)
    assert host_to_device(x, "cpu", FastPaths()) is x
    from nemo_desktop.core.models.fast_paths import fast_paths_for, to_memory_format

    assert to_memory_format(x, FastPaths(channels_last=True)).is_contiguous(memory_format=torch.channels_last)
    net = torch.nn.Sequential(*[torch.nn.Conv2d(3, 3, 1) for _ in range(4)])
    assert fast_paths_for(net, "cpu", torch.float32) == FastPaths()
    with FastPaths().autocast("cpu"):
        pass
