"""The adapters' differentiable extension (unit_tensor, logits_from_unit, features_from_unit), loaded through
the real registry path from tiny checkpoints: it agrees with the protocol's predict_proba / embed and carries
gradients to the pixels. Families without it get a clear error from the competency core."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from fixtures_tiny.classifiers import (TINY_CLASSES, build_tiny_clip, build_tiny_open_clip, build_tiny_siglip,
                                       build_tiny_timm)

from nemo_desktop.core.analyses.competency.classifier_view import require_differentiable
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model


def _load(family, tmp_path):
    names = {"class_names": TINY_CLASSES}
    if family == "timm":
        return load_model(ModelSpec("classifier", "timm", f"local-dir:{build_tiny_timm(tmp_path / 'm', label_names=TINY_CLASSES)}"),
                          LoadOptions(device="cpu"))
    if family == "open_clip":
        folder = build_tiny_open_clip(tmp_path / "m")["local_dir"]
        return load_model(ModelSpec("classifier", "open_clip", f"local-dir:{folder}", options=names),
                          LoadOptions(device="cpu"))
    build = build_tiny_clip if family == "hf-clip" else build_tiny_siglip
    return load_model(ModelSpec("classifier", family, str(build(tmp_path / "m")), options=names),
                      LoadOptions(device="cpu"))


@pytest.mark.parametrize("family", ["timm", "hf-clip", "hf-siglip", "open_clip"])
def test_unit_path_matches_the_protocol_and_has_gradients(family, tmp_path):
    clf = require_differentiable(_load(family, tmp_path))
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)) for _ in range(3)]
    x = clf.unit_tensor(images)
    assert x.shape[:2] == (3, 3) and 0 <= x.min() and x.max() <= 1
    probs = torch.softmax(clf.logits_from_unit(x).float(), 1).detach().numpy()
    np.testing.assert_allclose(probs, clf.predict_proba(images), atol=1e-5)
    f = clf.features_from_unit(x).detach().numpy()
    np.testing.assert_allclose(f / np.linalg.norm(f, axis=1, keepdims=True), clf.embed(images), atol=1e-5)
    x.requires_grad_(True)
    (g,) = torch.autograd.grad(clf.logits_from_unit(x)[:, 0].sum(), [x])
    assert g.abs().sum() > 0
