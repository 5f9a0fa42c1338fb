"""Indexing with GPU JPEG decoding (issue 40): the fallback on the CPU with a note, the agreement of the two
paths' embeddings (the device code run on CPU tensors), and per-file errors on the device path."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
from nemo_desktop.core.data import gpu_decode
from nemo_desktop.core.data.gpu_decode import EMBEDDING_TOLERANCE, device_plan, gpu_decode_plan, read_for_device
from nemo_desktop.core.data.input_pipeline import LoaderSettings, draft_side_for
from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.base.images import load_image
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    folder = build_tiny_timm(tmp_path_factory.mktemp("timm") / "m", label_names=TINY_CLASSES, input_size=64)
    return load_model(ModelSpec("classifier", "timm", f"local-dir:{folder}"), LoadOptions(device="cpu"))


def _photo(seed: int, size=(500, 375)) -> Image.Image:
    """A photo-like picture (smooth gradient, shapes, a little noise), the size of a typical ImageNet JPEG."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([(xx * (0.3 + rng.random())) % 256, (yy * (0.3 + rng.random())) % 256,
                     np.full_like(xx, rng.integers(0, 256))], -1).astype(np.float64)
    img = Image.fromarray(np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x0, y0 = int(rng.integers(0, w - 60)), int(rng.integers(0, h - 60))
        draw.ellipse([x0, y0, x0 + int(rng.integers(20, 160)), y0 + int(rng.integers(20, 160))],
                     fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    return img


def _dataset(root, n_per_class=2):
    for c in TINY_CLASSES[:3]:
        (root / c).mkdir(parents=True)
        for i in range(n_per_class):
            _photo(hash((c, i)) % 1000).save(root / c / f"{i}.jpg", quality=90)
    return root


def test_gpu_decode_on_the_cpu_falls_back_with_a_note(classifier, tmp_path, store):
    preprocess, note = gpu_decode_plan(classifier, "gpu")
    assert preprocess is None and "needs the classifier on a CUDA device" in note
    assert gpu_decode_plan(classifier, "cpu") == (None, None)
    data = _dataset(tmp_path / "data")
    index = build_index(data, classifier, store, loading=LoaderSettings(decode="gpu"))
    assert len(index) == 6 and any("CUDA device" in n for n in index.last_build.notes)
    plain = build_index(data, classifier, store, loading=LoaderSettings())  # nothing new: same rows
    assert np.array_equal(plain.features, index.features)


def test_both_decode_paths_give_agreeing_embeddings(classifier, tmp_path):
    """The device path (nvJPEG-style batched decode + antialiased torch resize) against the CPU path (PIL, draft
    mode) on JPEGs of ImageNet's typical size: cosine >= EMBEDDING_TOLERANCE for every image."""
    preprocess, note = device_plan(classifier, "cpu")
    assert note is None
    paths = []
    for i in range(8):
        p = tmp_path / f"{i}.jpg"
        _photo(i).save(p, quality=90)
        paths.append(p)
    draft = draft_side_for(classifier, LoaderSettings().draft_factor)
    cpu = classifier.outputs_from_pixels(classifier.to_device(
        classifier.prepare_batch([load_image(p, draft_side=draft) for p in paths]))).embeddings
    dev = classifier.outputs_from_pixels(classifier.to_device(preprocess([read_for_device(p) for p in paths])))
    cos = (np.asarray(cpu) * np.asarray(dev.embeddings)).sum(1)  # both are unit vectors
    assert cos.min() >= EMBEDDING_TOLERANCE, cos


def test_device_path_keeps_pngs_and_reports_a_corrupt_jpeg(classifier, tmp_path, store, monkeypatch):
    data = _dataset(tmp_path / "data")
    _photo(99).save(data / TINY_CLASSES[0] / "x.png")  # not a JPEG: decoded by PIL, resized on the device
    (data / TINY_CLASSES[1] / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 200)  # a JPEG header only
    monkeypatch.setattr(gpu_decode, "gpu_decode_plan", lambda clf, decode: device_plan(clf, "cpu"))
    index = build_index(data, classifier, store, loading=LoaderSettings(decode="gpu"), batch_size=4)
    report = index.last_build
    assert len(index) == 7 and list(report.errors) == [str(data / TINY_CLASSES[1] / "bad.jpg")]
    assert not report.notes
