"""ClassifierView: group aggregation, the numpy and torch paths agree, and argmax follows the top-1 rule."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.benchmark.views import ClassifierView
from nemo_desktop.core.models.protocols import ModelInfo


class LogitTable:
    """Classifier double whose 'images' are rows of a logit table (an int index into it)."""

    zero_shot = False

    def __init__(self, logits: np.ndarray, with_logits: bool = True):
        self.table = logits
        self.class_names = [f"c{i}" for i in range(logits.shape[1])]
        self.info = ModelInfo("test-double:table", "test-double", "1")
        if with_logits:
            self.logits = lambda images: self.table[list(images)]

    def predict_proba(self, images, *, class_prompts=None):
        z = self.table[list(images)]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def embed(self, images):
        return np.eye(len(images), 4)

    def preprocess(self, images):
        import torch

        return torch.as_tensor(self.table[list(images)], dtype=torch.float64)

    def forward_logits(self, pixel_values):
        return pixel_values * 1.0


GROUPS = [(0, 3), (1,), (4, 5, 6)]  # column 2 and 7 are masked


@pytest.fixture
def table():
    rng = np.random.default_rng(0)
    return rng.normal(size=(64, 8)) * 3


@pytest.mark.parametrize("with_logits", [True, False])
def test_max_view_is_the_top1_rule_over_unmasked_columns(table, with_logits):
    view = ClassifierView(LogitTable(table, with_logits), "t", ["a", "b", "c"], GROUPS)
    p = view.predict_proba(range(len(table)))
    assert p.shape == (64, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-6)
    kept = [0, 1, 3, 4, 5, 6]
    top = np.array(kept)[table[:, kept].argmax(axis=1)]
    assert p.argmax(axis=1).tolist() == [view.group_of(c) for c in top]
    assert view.group_of(2) is None and view.group_of(5) == 2


def test_sum_view_adds_member_probabilities(table):
    base = LogitTable(table)
    view = ClassifierView(base, "t", ["a", "b", "c"], GROUPS, aggregate="sum")
    p = view.predict_proba(range(len(table)))
    kept = [0, 1, 3, 4, 5, 6]
    e = np.exp(table[:, kept] - table[:, kept].max(axis=1, keepdims=True))
    q = e / e.sum(axis=1, keepdims=True)  # softmax over the unmasked columns
    np.testing.assert_allclose(p[:, 0], q[:, 0] + q[:, 2], rtol=1e-5)
    np.testing.assert_allclose(p[:, 2], q[:, 3:].sum(axis=1), rtol=1e-5)
    assert view.info.model_id.endswith("#t+sum")


@pytest.mark.parametrize("aggregate", ["max", "sum"])
def test_torch_forward_logits_match_numpy(table, aggregate):
    import torch

    view = ClassifierView(LogitTable(table), "t", ["a", "b", "c"], GROUPS, aggregate=aggregate)
    pv = view.preprocess(range(8)).requires_grad_(True)
    z = view.forward_logits(pv)
    np.testing.assert_allclose(torch.softmax(z, 1).detach().numpy(), view.predict_proba(range(8)), rtol=1e-5)
    z[:, 2].sum().backward()  # differentiable (Grad-CAM targets a view class)
    assert pv.grad[:, 2].abs().sum() == 0 and pv.grad[:, 7].abs().sum() == 0  # masked columns get nothing


def test_view_rejects_bad_groups_and_prompts(table):
    base = LogitTable(table)
    with pytest.raises(ValueError):
        ClassifierView(base, "t", ["a", "b"], [(0, 1), (1, 2)])  # overlapping
    with pytest.raises(ValueError):
        ClassifierView(base, "t", ["a"], [(9,)])  # outside the outputs
    view = ClassifierView(base, "t", ["a", "b", "c"], GROUPS)
    from nemo_desktop.core.base.errors import ConfigError

    with pytest.raises(ConfigError, match="not a zero-shot"):
        view.predict_proba([0], class_prompts={0: "a photo"})
