"""What the competency analyses need from a classifier beyond the Classifier protocol: gradients from pixels.

The gradient generators (IGD, FGD, LGD) differentiate the competency with respect to the image, so the
classifier must expose its forward pass on unnormalised [0, 1] tensors. Adapters opt in by implementing:

    unit_tensor(images)   -> (N, 3, H, W) float tensor in [0, 1] at the model's input size, on its device
    logits_from_unit(x)   -> (N, C) logits, differentiable with respect to x
    features_from_unit(x) -> (N, D) the features the classifier's last layer reads (f in the paper)
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

from ...base.errors import ConfigError


@runtime_checkable
class DifferentiableClassifier(Protocol):
    def unit_tensor(self, images: Sequence[Any]) -> Any: ...

    def logits_from_unit(self, x: Any) -> Any: ...

    def features_from_unit(self, x: Any) -> Any: ...


def require_differentiable(classifier: Any) -> Any:
    """The classifier itself, or a clear error naming what it lacks."""
    missing = [m for m in ("unit_tensor", "logits_from_unit", "features_from_unit")
               if not callable(getattr(classifier, m, None))]
    if missing:
        info = getattr(classifier, "info", None)
        name = getattr(info, "model_id", type(classifier).__name__)
        raise ConfigError(f"Competency estimation needs gradients from the classifier's pixels, and {name} does "
                          f"not provide {', '.join(missing)}.",
                          hint="The timm, Hugging Face CLIP/SigLIP and open_clip adapters support it; for "
                               "your own adapter, add these three methods.")
    return classifier
