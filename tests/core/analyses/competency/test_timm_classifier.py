"""The timm adapter's differentiable extension, loaded through the real registry path from a tiny checkpoint:
it agrees with the protocol's predict_proba/embed and carries gradients to the pixels."""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm

from nemo_desktop.core.analyses.competency.classifier_view import require_differentiable
from nemo_desktop.core.models.registry import LoadOptions, ModelSpec, load_model


def test_timm_unit_path_matches_the_protocol_and_has_gradients(tmp_path):
    folder = build_tiny_timm(tmp_path / "timm", label_names=TINY_CLASSES)
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{folder}"), LoadOptions(device="cpu"))
    require_differentiable(clf)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)) for _ in range(3)]
    x = clf.unit_tensor(images)
    assert x.shape == (3, 3, 64, 64) and 0 <= x.min() and x.max() <= 1
    probs = torch.softmax(clf.logits_from_unit(x), 1).detach().numpy()
    np.testing.assert_allclose(probs, clf.predict_proba(images), atol=1e-5)
    f = clf.features_from_unit(x).detach().numpy()
    np.testing.assert_allclose(f / np.linalg.norm(f, axis=1, keepdims=True), clf.embed(images), atol=1e-5)
    x.requires_grad_(True)
    (g,) = torch.autograd.grad(clf.logits_from_unit(x)[:, 0].sum(), [x])
    assert g.abs().sum() > 0
