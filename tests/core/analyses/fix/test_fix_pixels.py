"""The fix's images are preprocessed once and held on the host (uint8 for a timm classifier, which splits its
preprocessing into a host and a device half), and each batch read from them is exactly what the classifier's own
preprocessing gives."""
from __future__ import annotations

import numpy as np
import pytest
from fix_tiny_world import tiny_world
from PIL import Image

from nemo_desktop.core.analyses.fix.pixels import Pixels
from nemo_desktop.core.base.job_context import JobContext


def _images(n: int, side: int = 40) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8)) for _ in range(n)]


def test_timm_classifier_pixels_are_held_as_uint8_and_read_back_as_its_preprocessing(tmp_path):
    import torch

    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

    folder = build_tiny_timm(tmp_path / "tiny", label_names=TINY_CLASSES, input_size=32)
    clf = load_model(ModelSpec(kind="classifier", family="timm", source=f"local-dir:{folder}"),
                     LoadOptions(device="cpu", dtype="float32"))
    images = _images(70)  # more than one preprocessing batch
    seen = []
    x = Pixels.from_images(clf, images, JobContext(on_progress=seen.append), "Preparing")
    assert len(x) == 70 and x.host.dtype == torch.uint8 and x.device == torch.device("cpu")
    assert x.host.numel() == 70 * 3 * 32 * 32  # a quarter of the float pixels
    assert torch.equal(x[5:9], clf.preprocess(images[5:9]))
    index = torch.tensor([69, 0, 33])
    assert torch.equal(x[index], clf.preprocess([images[69], images[0], images[33]]))
    assert seen  # progress is reported while preparing


def test_a_classifier_without_the_split_keeps_its_preprocessed_pixels_on_the_host():
    import torch

    world = tiny_world(train_size=300, epochs=4, test_size=40)
    images = [im for im, _ in world.rest[:10]]
    x = Pixels.from_images(world.classifier, images, JobContext(), "Preparing")
    assert x.host.device.type == "cpu" and x.host.is_floating_point()
    assert torch.equal(x[2:5], world.classifier.preprocess(images[2:5]))


def test_cancel_while_preparing_stops_it():
    from nemo_desktop.core.base.errors import JobCancelled

    world = tiny_world(train_size=300, epochs=4, test_size=40)
    ctx = JobContext()
    ctx.cancel_token.cancel()
    with pytest.raises(JobCancelled):
        Pixels.from_images(world.classifier, [im for im, _ in world.rest[:10]], ctx, "Preparing")
