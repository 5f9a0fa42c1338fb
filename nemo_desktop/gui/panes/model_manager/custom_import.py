"""Import a user's fine-tuned timm classifier into the user catalog (Qt-free: runs as a job).

The entry is written to `<config>/catalog.json` (the catalog's documented user file), so the CLI sees the
same model (`nemo explain --classifier <id>`). It loads through the timm family's checkpoint source,
`checkpoint:<architecture>:<file>` with options.class_file: the same path as `--classifier` on the CLI.
Only the catalog entry is ever removed here; the user's weight and class files are never deleted.

Preprocessing (input size, normalisation, interpolation, crop) decides whether the weights see what they were
trained on: the same weights scored 93.3 % with their own config and 10.0 % with the architecture's defaults.
It comes from the checkpoint's `config.json` (timm's `save_for_hf` layout: `pretrained_cfg` with input_size,
mean, std, interpolation, crop_pct) when one sits next to the weights file, else from what the user set in
the import dialog; either way it is written to the entry's `options.data_config`, which the timm loader passes
to `timm.data.resolve_model_data_config`, and the entry's notes say where it came from.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from nemo_desktop.core.base.errors import ConfigError

CHECKPOINT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


INTERPOLATIONS = ("bicubic", "bilinear", "nearest")
# Normalisations a user can pick (mean, std), in [0, 1] pixel units.
NORMALISATIONS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "ImageNet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "CLIP / OpenAI": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
    "Inception (0.5, 0.5)": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "None (pixels in 0..1)": ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
}
FROM_CONFIG = "the checkpoint's config.json"
FROM_USER = "set at import"


@dataclass(frozen=True)
class Preprocessing:
    """What the classifier's eval transform does to an image before the model sees it."""

    input_size: tuple[int, int]  # (height, width)
    mean: tuple[float, ...]
    std: tuple[float, ...]
    interpolation: str = "bicubic"
    crop_pct: float = 1.0  # 1.0 = resize to input_size without a centre crop margin
    source: str = FROM_USER

    def check(self) -> None:
        h, w = self.input_size
        if not (8 <= h <= 4096 and 8 <= w <= 4096):
            raise ConfigError(f"Input size {h} x {w} is out of range.", hint="Use the size the weights were trained "
                              "at, between 8 and 4096 pixels (e.g. 224).")
        if len(self.mean) != 3 or len(self.std) != 3 or any(x <= 0 for x in self.std):
            raise ConfigError("The normalisation needs three means and three positive standard deviations.")
        if self.interpolation not in INTERPOLATIONS:
            raise ConfigError(f"Unknown interpolation '{self.interpolation}'.",
                              hint=f"Use one of: {', '.join(INTERPOLATIONS)}.")
        if not 0.1 <= self.crop_pct <= 1.0:
            raise ConfigError(f"Crop fraction {self.crop_pct} is out of range.", hint="Use 0.1 .. 1.0 (1 = no crop).")

    def data_config(self) -> dict:
        """The timm loader's `options.data_config` (timm.data.resolve_model_data_config overrides)."""
        return {"input_size": [3, int(self.input_size[0]), int(self.input_size[1])],
                "mean": [float(x) for x in self.mean], "std": [float(x) for x in self.std],
                "interpolation": self.interpolation, "crop_pct": float(self.crop_pct)}

    def describe(self) -> str:
        h, w = self.input_size
        return (f"{w} x {h} px, {self.interpolation}, crop {self.crop_pct:g}, mean "
                f"{', '.join(f'{x:.3g}' for x in self.mean)}, std {', '.join(f'{x:.3g}' for x in self.std)}")


def checkpoint_config(weights: Path) -> tuple[Preprocessing | None, str | None]:
    """(preprocessing, architecture) from a `config.json` next to the weights file (timm's save_for_hf
    layout; a flat config with the same keys is read too); (None, None) when there is none or it says nothing."""
    path = Path(weights).expanduser().parent / "config.json"
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"The checkpoint's {path.name} cannot be read.", hint="Fix or move the file; without it "
                          "the preprocessing is set in the import dialog.", detail=repr(exc)) from exc
    if not isinstance(data, dict):
        return None, None
    cfg = data.get("pretrained_cfg") if isinstance(data.get("pretrained_cfg"), dict) else data
    arch = data.get("architecture") if isinstance(data.get("architecture"), str) else None
    size = cfg.get("test_input_size") or cfg.get("input_size")
    if not size or "mean" not in cfg or "std" not in cfg:
        return None, arch
    try:
        pre = Preprocessing(input_size=(int(size[-2]), int(size[-1])), mean=tuple(map(float, cfg["mean"])),
                            std=tuple(map(float, cfg["std"])),
                            interpolation=str(cfg.get("interpolation") or "bicubic"),
                            crop_pct=float(cfg.get("test_crop_pct") or cfg.get("crop_pct") or 1.0),
                            source=FROM_CONFIG)
    except (TypeError, ValueError, IndexError) as exc:
        raise ConfigError(f"The checkpoint's {path.name} has an unreadable preprocessing entry.",
                          hint="Fix input_size / mean / std there, or move the file and set them at import.",
                          detail=repr(exc)) from exc
    pre.check()
    return pre, arch


@dataclass(frozen=True)
class CheckpointImport:
    model_id: str
    architecture: str
    weights: Path
    class_file: Path
    description: str = ""
    # Used when the checkpoint has no config.json; a config.json next to the weights always wins.
    preprocessing: Preprocessing | None = None


def class_count(class_file: Path) -> int:
    from nemo_desktop.core.models.vocab import read_class_file

    return len(read_class_file(class_file))


def entry_dict(imp: CheckpointImport) -> dict:
    """The catalog entry for an import; raises ConfigError naming the first problem."""
    if not _ID_RE.match(imp.model_id):
        raise ConfigError(f"'{imp.model_id}' cannot be a model name.",
                          hint="Use letters, digits, '.', '_' or '-' (at most 64 characters), e.g. my-resnet50.")
    arch = imp.architecture.strip()
    if not re.match(r"^[A-Za-z0-9_.]+$", arch or ""):
        raise ConfigError("Give the timm architecture the weights were trained with, e.g. resnet50.")
    weights = Path(imp.weights).expanduser().resolve()
    if not weights.is_file():
        raise ConfigError(f"Weights file not found: {weights}", hint="Choose the .safetensors or .pth file.")
    if weights.suffix.lower() not in CHECKPOINT_SUFFIXES:
        raise ConfigError(f"'{weights.name}' is not a weights file NEMO Desktop reads.",
                          hint="Use a .safetensors file (preferred) or a .pth / .pt state dict.")
    class_file = Path(imp.class_file).expanduser().resolve()
    n = class_count(class_file)  # ConfigError when missing or empty
    pre = checkpoint_config(weights)[0] or imp.preprocessing
    if pre is None:
        raise ConfigError(f"{weights.name} has no config.json beside it, so its preprocessing is unknown.",
                          hint="Set the input size, normalisation and interpolation the weights were trained with.")
    pre.check()
    size = weights.stat().st_size
    # A state dict of float32 weights holds ~size/4 parameters; bf16 needs 2 bytes each, plus activations.
    vram = round(max(0.1, size / 2 / 1e9 * 1.25 + 0.1), 1)
    return {
        "id": imp.model_id, "kind": "classifier", "family": "timm", "repo": str(weights),
        "source": f"checkpoint:{arch}:{weights}", "revision": "local", "license": "user-provided",
        "gated": False, "disk_size_bytes": max(1, size), "vram_bf16_gb": vram, "recommended_gpu": "any",
        "description": imp.description.strip() or f"Imported {arch} checkpoint ({n} classes)",
        "options": {"class_file": str(class_file), "data_config": pre.data_config()},
        "estimated": ["vram_bf16_gb"],
        "notes": f"Imported from {weights.name} with class names from {class_file.name}; preprocessing "
                 f"({pre.describe()}) from {pre.source}.",
    }


def add_checkpoint(imp: CheckpointImport):
    """Validate and add (or replace) the user-catalog entry; returns the CatalogEntry as the catalog sees it."""
    from nemo_desktop.core.models.user_catalog import put_user_entry

    return put_user_entry(entry_dict(imp), "import")  # the catalog's own validation, before anything is written
