"""Configurations of the competency analyses (frozen; field metadata drives the derived CLI/GUI forms).

Defaults are the reference implementation's (sarapohland/competency-counterfactuals at 6fd0ee4, read through
docs note methods/competency.md): threshold 0.9, 100 iterations, gamma 0.1, Adam lr 1e-3, calibration grid
z in {0, 0.05, ..., 4.95}, mean shift 2 (all three reference code bases use 2*mu). Where the reference is
wrong (batch-wide stopping, no clamping) the default is the corrected behaviour and `compatibility=True`
reproduces the reference.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ...base.errors import ConfigError

GENERATORS = ("igd", "fgd", "reco", "lgd", "lnn")


def _f(default: Any, label: str, help: str, **meta: Any) -> Any:
    return field(default=default, metadata={"label": label, "help": help, **meta})


def _check_ranges(cfg: Any) -> None:
    """Refuse values outside each field's declared min/max/choices (one message naming the field)."""
    for f in fields(cfg):
        v = getattr(cfg, f.name)
        m = f.metadata
        if "choices" in m:
            vals = v if isinstance(v, tuple) else (v,)
            bad = [x for x in vals if x not in m["choices"]]
            if bad:
                raise ConfigError(f"{m['label']}: {', '.join(map(str, bad))} is not one of "
                                  f"{', '.join(map(str, m['choices']))}.")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if "min" in m and v < m["min"] or "max" in m and v > m["max"]:
                raise ConfigError(f"{m['label']} must be between {m.get('min', '-inf')} and "
                                  f"{m.get('max', 'inf')} (got {v}).")


def as_names(value: Any) -> tuple[str, ...]:
    """A tuple of names; "igd,lgd" (from a form or a file) is two generators, not seven letters."""
    if isinstance(value, str):
        return tuple(m.strip() for m in value.split(",") if m.strip())
    return tuple(value)


def config_dict(cfg: Any) -> dict[str, Any]:
    """JSON-ready {field: value} (tuples as lists) for manifests and result keys."""
    return {f.name: list(v) if isinstance(v := getattr(cfg, f.name), tuple) else v for f in fields(cfg)}


@dataclass(frozen=True)
class EstimatorConfig:
    """How to fit a PaRCE competency estimator: the reconstruction autoencoder and its calibration."""

    image_size: int = _f(64, "Autoencoder image size", "Side in pixels at which the autoencoder reconstructs "
                         "images (the classifier's input is resized to it).", min=8, max=512)
    channels: tuple[int, ...] = _f((32, 64, 64), "Encoder channels", "Output channels of each stride-2 "
                                   "convolution of the encoder; the decoder mirrors them.")
    latent_dim: int = _f(256, "Latent size", "Width of the autoencoder's latent vector (used by LGD and LNN).",
                         min=2, max=4096)
    epochs: int = _f(50, "Epochs", "Training epochs of the autoencoder (reference: 50).", min=1, max=10_000)
    batch_size: int = _f(128, "Batch size", "Training batch size (reference: 128).", min=1, max=4096)
    learning_rate: float = _f(1e-3, "Learning rate", "Adam learning rate (reference: 1e-3).", min=1e-7, max=1.0)
    calibration_fraction: float = _f(0.2, "Held-out calibration fraction", "Share of the labelled images kept "
                                     "out of training to compute class statistics and calibrate.", min=0.05,
                                     max=0.9)
    calibration_set: str = _f("", "Calibration set", "A folder of class folders, a CSV manifest or fiftyone:NAME "
                              "of labelled images to compute the class statistics and calibrate on. Empty: hold "
                              "'calibration fraction' of the fit set out (the reference's split); with a set, every "
                              "fit image trains the autoencoder and the fraction is not used. The result records "
                              "which was used (and the set's content fingerprint).", path=True)
    mean_shift: float = _f(2.0, "Mean shift", "P(ID) = 1 - Phi((L - shift*mu_c)/sigma_c - z). The reference code "
                           "uses 2.", min=0.0, max=10.0)
    z_max: float = _f(4.95, "Calibration search end", "Largest z tried by the calibration (reference: 4.95).",
                      min=0.0, max=50.0)
    z_step: float = _f(0.05, "Calibration search step", "Grid step of the calibration search.", min=1e-4, max=1.0)
    seed: int = _f(0, "Seed", "Seeds the split, the initialisation and the batch order.", min=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", tuple(int(c) for c in self.channels))
        if not self.channels or min(self.channels) < 1:
            raise ConfigError("Encoder channels: give at least one positive channel count.")
        if self.image_size % (2 ** len(self.channels)):
            raise ConfigError(f"Autoencoder image size {self.image_size} must be divisible by "
                              f"2^{len(self.channels)} (one halving per encoder layer).")
        _check_ranges(self)

    def architecture(self) -> dict[str, Any]:
        return {"kind": "conv-autoencoder/v1", "image_size": self.image_size, "channels": list(self.channels),
                "latent_dim": self.latent_dim, "in_channels": 3}


@dataclass(frozen=True)
class CounterfactualConfig:
    """How to generate high-competency counterfactuals and explain low competency."""

    methods: tuple[str, ...] = _f(GENERATORS, "Generators", "Which counterfactual generators to run.",
                                  choices=GENERATORS)
    threshold: float = _f(0.9, "Competency threshold", "A counterfactual succeeds when its competency reaches "
                          "this value (reference: 0.9).", min=0.0, max=1.0)
    max_iter: int = _f(100, "Iterations", "Most gradient steps of IGD, FGD and LGD (reference: 100).", min=1,
                       max=100_000)
    gamma: float = _f(0.1, "Similarity weight (gamma)", "Weight of the distance term in IGD/FGD/LGD losses.",
                      min=0.0, max=1000.0)
    learning_rate: float = _f(1e-3, "Step size", "Adam learning rate of the gradient generators.", min=1e-7,
                              max=10.0)
    igd_distance: str = _f("lpips", "IGD distance", "Image distance of IGD (reference: LPIPS-AlexNet).",
                           choices=("lpips", "l2", "l1"))
    fgd_distance: str = _f("cos", "FGD distance", "Feature distance of FGD (reference: negative cosine).",
                           choices=("cos", "l2", "l1"))
    lgd_distance: str = _f("cos", "LGD distance", "Latent distance of LGD (reference: negative cosine).",
                           choices=("cos", "l2", "l1"))
    lnn_distance: str = _f("l1", "LNN distance", "Latent distance of the nearest-neighbour search "
                           "(reference: l1).", choices=("l1", "l2"))
    lpips_size: int = _f(64, "LPIPS size", "Images are upsampled to at least this side for LPIPS (AlexNet-LPIPS "
                         "fails on tiny images).", min=32, max=1024)
    compatibility: bool = _f(False, "Reference compatibility", "Reproduce the reference code: stop a batch only "
                             "when all its images pass, no clamping to [0,1], strict '>' success.")
    batch_size: int = _f(50, "Batch size", "Images optimised together (reference: 50).", min=1, max=4096)
    seed: int = _f(0, "Seed", "Seeds torch before each generator (the generators are deterministic anyway).",
                   min=0)
    explain: bool = _f(True, "Explain with the MLLM", "Ask the MLLM why competency is low, with and without the "
                       "counterfactual.")
    explain_methods: tuple[str, ...] = _f(("reco", "lgd", "lnn"), "Explained counterfactuals", "Generators "
                                          "whose counterfactual is shown to the MLLM (the paper's three).",
                                          choices=GENERATORS)
    dataset_subject: str = _f("images", "What the training images show", "Fills 'a dataset of ...' in the "
                              "prompt's description of the training data, e.g. 'handwritten digits'.")
    dataset_description: str = _f("", "Dataset description", "Replaces the generated description of the "
                                  "training data in the prompt (prompt B.1/B.2 of the paper).")
    composite: bool = _f(True, "One composite image", "Show original and counterfactual as one side-by-side "
                         "image (the reference) instead of two images.")
    min_side: int = _f(224, "MLLM image side", "Small images are upscaled (nearest) to this shortest side for "
                       "the MLLM.", min=16, max=4096)
    max_new_tokens: int = _f(100, "Answer tokens", "Most tokens of each MLLM answer (reference: 100).", min=1,
                             max=8192)

    def __post_init__(self) -> None:
        for name in ("methods", "explain_methods"):
            object.__setattr__(self, name, as_names(getattr(self, name)))
        if not self.methods:
            raise ConfigError("Generators: choose at least one of " + ", ".join(GENERATORS) + ".")
        _check_ranges(self)

    @property
    def batch_stop(self) -> bool:
        return self.compatibility

    @property
    def clamp(self) -> bool:
        return not self.compatibility


# -- competency-bench (core/analyses/competency/bench.py runs it; its settings are here, light to import) ----
def _same(name: str) -> Any:
    """The CounterfactualConfig field `name` (default and metadata), so both configs describe it alike."""
    f = CounterfactualConfig.__dataclass_fields__[name]
    return field(default=f.default, metadata=f.metadata)


@dataclass(frozen=True)
class CompetencyBenchConfig:
    """Settings of `competency-bench`: the generators' settings, how many images, and the feature space."""

    methods: tuple[str, ...] = _same("methods")
    threshold: float = _same("threshold")
    max_iter: int = _same("max_iter")
    gamma: float = _same("gamma")
    learning_rate: float = _same("learning_rate")
    igd_distance: str = _same("igd_distance")
    fgd_distance: str = _same("fgd_distance")
    lgd_distance: str = _same("lgd_distance")
    lnn_distance: str = _same("lnn_distance")
    lpips_size: int = _same("lpips_size")
    compatibility: bool = _same("compatibility")
    batch_size: int = _same("batch_size")
    seed: int = _same("seed")
    max_images: int = field(default=100, metadata={
        "label": "Most low-competency images", "min": 1, "max": 100_000,
        "help": "Generators run on at most this many of the set's low-competency images (in file order)."})
    feature_space: str = field(default="classifier", metadata={
        "label": "FD/KD feature space", "choices": ("classifier", "latent", "inception"),
        "help": "Features in which FD and KD compare counterfactuals with the reference images: the "
                "classifier's own (the default), the autoencoder's latent, or the FID Inception (when its "
                "weights are installed; else FD/KD are reported as unavailable)"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "methods", as_names(self.methods))
        self.counterfactual_config()  # the shared fields' checks, with their messages
        _check_ranges(self)

    def counterfactual_config(self) -> CounterfactualConfig:
        shared = {n: getattr(self, n) for n in self.__dataclass_fields__
                  if n in CounterfactualConfig.__dataclass_fields__}
        return CounterfactualConfig(**shared, explain=False)
