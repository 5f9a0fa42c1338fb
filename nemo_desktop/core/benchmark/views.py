"""An ImageNet-1k classifier seen through a benchmark's class list (the benchmark's evaluation protocol).

Each view class is a group of ImageNet-1k output columns; the columns of no group are dropped (masked):

  * ImageNet-R: 200 groups of one column each -> the softmax over the 200 masked logits (hendrycks eval.py).
  * ObjectNet: 113 groups over 125 columns -> the prediction is the class of the highest of the 125 logits.
  * ImageNet-D: 113 groups plus every other ImageNet class as its own group, over all 1000 columns -> the
    prediction is correct exactly when the 1000-way top-1 index is in the class's index list.

A group's logit is the maximum of its members' logits (`aggregate="max"`, the default): the view's argmax is
then always the group of the highest member logit, i.e. exactly the benchmark's top-1 rule. `"sum"` (the
log-sum-exp of the members, so that a class's probability is the sum of its members' probabilities) is
available, but its argmax can differ from the top-1 rule when a class spreads its mass over several columns.
Probabilities are the softmax over the view's group logits, so `predict_proba` and CEI work in view space.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..base.errors import ConfigError
from ..models.protocols import ModelInfo

AGGREGATES = ("max", "sum")
# Attributes of the base classifier that hold in view space too (the network, its preprocessing, its device),
# read by methods such as Grad-CAM. Not delegated: anything returning base-class scores (logits of 1000
# columns would be wrong here).
_DELEGATED = frozenset({"model", "gradcam_layer", "data_config", "model_view", "transform", "processor", "device",
                        "dtype", "batch_size", "embed_from_pixels"})


class ClassifierView:
    """A Classifier whose classes are groups of a base classifier's output columns."""

    zero_shot = False

    def __init__(self, base: Any, view_name: str, class_names: Sequence[str], groups: Sequence[Sequence[int]], *,
                 aggregate: str = "max") -> None:
        if aggregate not in AGGREGATES:
            raise ConfigError(f"Unknown class aggregation '{aggregate}'.", hint=f"Use one of {', '.join(AGGREGATES)}.")
        if len(class_names) != len(groups):
            raise ValueError(f"{len(class_names)} class names for {len(groups)} groups")
        width = len(base.class_names)
        flat = [int(i) for g in groups for i in g]
        if any(not g for g in groups) or any(not 0 <= i < width for i in flat) or len(flat) != len(set(flat)):
            raise ValueError("groups must be non-empty, disjoint and index the base classifier's outputs")
        self.base = base
        self.view_name = view_name
        self.class_names = [str(n) for n in class_names]
        self.groups = [tuple(int(i) for i in g) for g in groups]
        self.aggregate = aggregate
        longest = max(len(g) for g in self.groups)
        # Padded (C, longest) column matrix plus a validity mask, for vectorised max / log-sum-exp.
        self._cols = np.array([g + (g[0],) * (longest - len(g)) for g in self.groups], dtype=np.int64)
        self._valid = np.array([[j < len(g) for j in range(longest)] for g in self.groups])
        self._group_of = {c: k for k, g in enumerate(self.groups) for c in g}
        base_info = base.info
        extra = dict(getattr(base_info, "extra", {}) or {})
        extra.update({"view": view_name, "base_model_id": base_info.model_id, "aggregate": aggregate})
        self.info = ModelInfo(model_id=f"{base_info.model_id}#{view_name}" + ("" if aggregate == "max" else
                                                                             f"+{aggregate}"),
                              family=base_info.family, revision=base_info.revision, extra=extra)

    def __repr__(self) -> str:
        return f"ClassifierView({self.info.model_id!r}, {len(self.class_names)} classes)"

    def group_of(self, base_index: int) -> int | None:
        """The view class that a base output column belongs to (None: the column is masked)."""
        return self._group_of.get(int(base_index))

    # -- Classifier protocol ------------------------------------------------------------------------------
    def predict_proba(self, images: Sequence[Any], *, class_prompts: Mapping[int, str] | None = None) -> np.ndarray:
        if class_prompts:
            raise ConfigError(f"{self.info.model_id} is not a zero-shot classifier: it has no class prompts to "
                              "replace.")
        return _softmax(self.view_logits(self._base_logits(images)))

    def view_logits(self, base_logits: np.ndarray) -> np.ndarray:
        """(N, C_view) group logits from (N, C_base) base logits (or log-probabilities: same softmax)."""
        z = np.asarray(base_logits, dtype=np.float64)[:, self._cols]  # (N, C, longest)
        if self.aggregate == "max":
            return np.where(self._valid, z, -np.inf).max(axis=2)
        m = np.where(self._valid, z, -np.inf).max(axis=2, keepdims=True)
        s = np.where(self._valid, np.exp(z - m), 0.0).sum(axis=2)
        return m[..., 0] + np.log(s)

    def logits(self, images: Sequence[Any]) -> np.ndarray:
        """(N, C_view) group logits (up to a per-row constant when the base has no `logits`)."""
        return self.view_logits(self._base_logits(images)).astype(np.float32)

    def embed(self, images: Sequence[Any]) -> np.ndarray:
        return self.base.embed(images)

    def predict_with_embeddings(self, images: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """View probabilities and the base's embeddings from one forward pass of the base."""
        if self._one_pass_logits():
            out = _concat_outputs(self.base, images)
            return _softmax(self.view_logits(out.logits)), out.embeddings
        from ..models.outputs import predict_with_embeddings

        p, feats = predict_with_embeddings(self.base, images)  # log P: the same view softmax as _base_logits
        return _softmax(self.view_logits(np.log(np.maximum(np.asarray(p, np.float64), 1e-300)))), feats

    def preprocess(self, images: Sequence[Any]) -> Any:
        return self.base.preprocess(images)

    def forward_logits(self, pixel_values: Any) -> Any:
        """Differentiable view logits (Grad-CAM targets a view class)."""
        import torch

        z = self.base.forward_logits(pixel_values)
        cols = torch.as_tensor(self._cols, device=z.device)
        gathered = z[:, cols]  # (N, C, longest)
        valid = torch.as_tensor(self._valid, device=z.device)
        masked = gathered.masked_fill(~valid, float("-inf"))
        return masked.amax(dim=2) if self.aggregate == "max" else torch.logsumexp(masked, dim=2)

    def unload(self) -> None:
        fn = getattr(self.base, "unload", None)
        if callable(fn):
            fn()

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes the view does not have itself.
        if name in _DELEGATED and "base" in self.__dict__:
            return getattr(self.base, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    # -- internals ----------------------------------------------------------------------------------------
    def _one_pass_logits(self) -> bool:
        """True when the base gives logits in its one-pass outputs and `_base_logits` would use logits too."""
        return (callable(getattr(self.base, "outputs_from_pixels", None))
                and callable(getattr(self.base, "logits", None)) and not getattr(self.base, "zero_shot", False))

    def _base_logits(self, images: Sequence[Any]) -> np.ndarray:
        logits = getattr(self.base, "logits", None)
        if callable(logits) and not getattr(self.base, "zero_shot", False):
            return np.asarray(logits(images), dtype=np.float64)
        # log P = logit - logsumexp(all logits): a per-row shift, so the view's softmax is unchanged.
        p = np.asarray(self.base.predict_proba(images), dtype=np.float64)
        return np.log(np.maximum(p, 1e-300))


def _concat_outputs(base: Any, images: Sequence[Any]):
    from ..models.batching import batched
    from ..models.outputs import ClassifierOutputs

    return ClassifierOutputs.concat([base.outputs_from_pixels(base.preprocess(chunk))
                                     for chunk in batched(list(images), base.batch_size)], len(base.class_names))


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
