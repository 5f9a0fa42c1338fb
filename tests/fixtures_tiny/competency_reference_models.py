"""Tiny PaRCE models rebuilt bit-for-bit from a seed, for the agreement check with the reference implementation
(sarapohland/competency-counterfactuals) without any weights in the repository (test code, never shipped).

Everything is made with numpy (its PCG64 generator and float64 arithmetic give the same bits on every machine and
torch version), then cast to float32:

- images: scikit-learn's bundled digits (real 8x8 scans), nearest-upsampled to 16x16 and drawn in one of six
  inks; calibration = 20 images per class (10 classes), test = 30 images, a third of them noised, a third
  pixelated or inverted, so that competency spreads over (0, 1);
- classifier: a nearest-centroid linear layer (class means of 40 other images per class) with a softmax, i.e.
  `flatten -> fc(768, 10) -> softmax` in the reference's layer-list format (90% calibration accuracy);
- autoencoder: NEMO's ConvAutoencoder(16 px, channels (8, 16), latent 16) with seeded random weights, which the
  reference's layer-list format expresses layer for layer (`AE_LAYERS`). Its last layer is damped towards a light
  grey page (sigmoid(1.7) = 0.85), so the reconstruction loss measures how much ink and which colours an image
  has: it spreads within a class (std/mean 0.3), as a trained model's does, so P(ID) is not 1 everywhere. PaRCE
  only needs *a* reconstruction model; the comparison is of the estimator, not of training.

`reference_state_dicts` maps the same tensors onto the reference's `NeuralNet` parameter names.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

SEED = 20251123
SIDE = 16
N_CLASSES = 10
CAL_PER_CLASS, CENTROID_PER_CLASS, N_TEST = 20, 40, 30
AE = dict(image_size=SIDE, channels=(8, 16), latent_dim=16)
INKS = np.array([(220, 0, 0), (0, 0, 220), (0, 150, 0), (0, 0, 0), (255, 140, 0), (128, 0, 128)], np.float64) / 255
CLASS_NAMES = [str(d) for d in range(N_CLASSES)]
# Softmax temperature of the nearest-centroid logits: at 0.75 the mean confidence (0.904) is just above the
# calibration accuracy (0.90), so PaRCE's z search ends inside its range (z* = 0.85), not at either end.
TEMPERATURE = 0.75

# The same networks in the reference's `NeuralNet` layer-list format (src/networks/model.py).
CLASSIFIER_LAYERS = [{"name": "flatten"},
                     {"name": "fc", "n_in": 3 * SIDE * SIDE, "n_out": N_CLASSES, "activation": "softmax"}]
AE_LAYERS = [
    {"name": "conv", "n_in": 3, "n_out": 8, "kernel": 3, "stride": 2, "pad": 1, "activation": "relu"},
    {"name": "conv", "n_in": 8, "n_out": 16, "kernel": 3, "stride": 2, "pad": 1, "activation": "relu"},
    {"name": "flatten"},
    {"name": "fc", "n_in": 16 * 4 * 4, "n_out": 16},
    {"name": "fc", "n_in": 16, "n_out": 16 * 4 * 4, "activation": "relu"},
    {"name": "unflatten", "channels": 16, "height": 4, "width": 4},
    {"name": "transpose", "n_in": 16, "n_out": 8, "kernel": 4, "stride": 2, "pad": 1, "activation": "relu"},
    {"name": "transpose", "n_in": 8, "n_out": 3, "kernel": 4, "stride": 2, "pad": 1, "activation": "sigmoid"},
]
# NEMO ConvAutoencoder parameter prefix -> the reference NeuralNet's (indices count activation modules too).
AE_NAMES = {"encoder.0": "net.0", "encoder.2": "net.2", "encoder.5": "net.5", "decoder_fc.0": "net.6",
            "decoder.0": "net.9", "decoder.2": "net.11"}


@dataclass
class ReferenceWorld:
    x_cal: torch.Tensor  # (200, 3, 16, 16) float32 in [0, 1]
    y_cal: np.ndarray  # (200,) int64
    x_test: torch.Tensor  # (30, 3, 16, 16)
    classifier_weight: torch.Tensor  # (10, 768)
    classifier_bias: torch.Tensor  # (10,)
    ae_state: dict[str, torch.Tensor]  # NEMO ConvAutoencoder state dict

    def checksums(self) -> dict[str, float]:
        """Sums of the rebuilt inputs and weights (float64): a drift in the rebuild shows here, not as a PaRCE error."""
        parts = {"x_cal": self.x_cal, "x_test": self.x_test, "classifier_weight": self.classifier_weight,
                 "ae": torch.cat([v.flatten() for v in self.ae_state.values()])}
        return {k: float(v.double().abs().sum()) for k, v in parts.items()}


def _render(digits8: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """(N, 8, 8) scans in 0..16 -> (N, 3, 16, 16) float64 images: white paper, the digit in its ink."""
    a = np.kron(digits8 / 16.0, np.ones((2, 2)))[:, None]  # (N, 1, 16, 16) ink coverage
    return 1.0 - a * (1.0 - inks[:, :, None, None])


def _perturb(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Thirds: unchanged, uniform noise, pixelated (4x4 blocks) or inverted."""
    out = x.copy()
    n = len(x)
    noisy = slice(n // 3, 2 * n // 3)
    out[noisy] = np.clip(x[noisy] + rng.uniform(-0.5, 0.5, x[noisy].shape), 0.0, 1.0)
    for i in range(2 * n // 3, n):
        if i % 2:
            out[i] = 1.0 - x[i]
        else:
            blocks = x[i].reshape(3, 4, 4, 4, 4).mean(axis=(2, 4))
            out[i] = np.kron(blocks, np.ones((4, 4)))
    return out


def _ae_state(rng: np.random.Generator) -> dict[str, torch.Tensor]:
    from nemo_desktop.core.analyses.competency.autoencoder import ConvAutoencoder

    template = ConvAutoencoder(**AE).state_dict()
    state = {}
    for name, t in template.items():
        if name.endswith("bias"):
            w = rng.uniform(-0.05, 0.05, tuple(t.shape))
        else:
            fan_in = int(np.prod(t.shape[1:])) if not name.startswith("decoder.") else int(t.shape[0]) * 4
            w = rng.normal(0.0, np.sqrt(2.0 / fan_in), tuple(t.shape))
        state[name] = torch.from_numpy(w.astype(np.float32))
    state["decoder.2.weight"] = state["decoder.2.weight"] * 0.05  # damped: mostly the page colour below
    state["decoder.2.bias"] = torch.full_like(state["decoder.2.bias"], 1.7)
    return state


def build_reference_world(seed: int = SEED) -> ReferenceWorld:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images, target = digits.images.astype(np.float64), digits.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    inks = INKS[rng.integers(0, len(INKS), len(images))]
    x = _render(images, inks)
    order = rng.permutation(len(images))
    cal, centroid, rest = [], [], []
    counts = np.zeros(N_CLASSES, int)
    for i in order:
        c = target[i]
        if counts[c] < CAL_PER_CLASS:
            cal.append(i)
        elif counts[c] < CAL_PER_CLASS + CENTROID_PER_CLASS:
            centroid.append(i)
        else:
            rest.append(i)
        counts[c] += 1
    test = np.array(rest[:N_TEST])
    cal, centroid = np.array(cal), np.array(centroid)
    flat = x[centroid].reshape(len(centroid), -1)
    means = np.stack([flat[target[centroid] == c].mean(axis=0) for c in range(N_CLASSES)])
    weight = TEMPERATURE * means  # logits = T * (x.mu_c - |mu_c|^2 / 2): nearest centroid, as a linear layer
    bias = -0.5 * TEMPERATURE * (means ** 2).sum(axis=1)
    x_test = _perturb(x[test], rng)
    return ReferenceWorld(torch.from_numpy(x[cal].astype(np.float32)), target[cal],
                          torch.from_numpy(x_test.astype(np.float32)),
                          torch.from_numpy(weight.astype(np.float32)), torch.from_numpy(bias.astype(np.float32)),
                          _ae_state(rng))


def reference_state_dicts(world: ReferenceWorld) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(classifier, autoencoder) state dicts under the reference NeuralNet's parameter names."""
    clf = {"net.1.weight": world.classifier_weight, "net.1.bias": world.classifier_bias}
    ae = {}
    for name, t in world.ae_state.items():
        prefix, leaf = name.rsplit(".", 1)
        ae[f"{AE_NAMES[prefix]}.{leaf}"] = t
    return clf, ae


class ReferenceWorldClassifier:
    """The nearest-centroid classifier behind the Classifier protocol plus the differentiable extension."""

    zero_shot = False

    def __init__(self, world: ReferenceWorld) -> None:
        from nemo_desktop.core.models.protocols import ModelInfo

        self.class_names = list(CLASS_NAMES)
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * SIDE * SIDE, N_CLASSES))
        self.net[1].load_state_dict({"weight": world.classifier_weight, "bias": world.classifier_bias})
        self.net.eval()
        self.info = ModelInfo("test-double:reference-centroids", "test-double", f"seed-{SEED}")

    def unit_tensor(self, images):
        return torch.stack(list(images)) if not isinstance(images, torch.Tensor) else images

    def logits_from_unit(self, x):
        return self.net(x)

    def features_from_unit(self, x):
        return x.flatten(1)
