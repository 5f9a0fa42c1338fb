"""The first-run demo: a real handwritten-digits image dataset and a small real classifier, offline, from what ships.

Everything comes from the 1,797 real 8x8 digits shipped in `resources/model_diff/digits_8x8.npz` (UCI, CC BY 4.0)
and the product's renderer (`analyses/model_diff/synthetic_digits.py`), split as the renderer splits them:

* the dataset is the `eval` pool (360 digits, index % 5 == 0), written as 64 px PNGs in one folder per class
  (`zero` … `nine`) under the user's data folder, so the Dataset browser opens it like any user's folder;
* the classifier is timm's `test_efficientnet` (0.1 M parameters) trained on the `train` pool (1,437 digits) for a
  few epochs on the CPU (seconds), saved with `timm.models.save_for_hf` as safetensors plus a config.json that
  carries its preprocessing (32 px, mean/std 0.5) and class names, and registered in the user catalog as a
  `local-dir:` timm model. It is loaded by the same loader as any timm checkpoint; nothing here is a test double.

The classifier never saw the dataset's digits, so indexing the dataset measures held-out accuracy and leaves a
few real mistakes to explain. A multimodal LLM and an image editor are not part of the demo: they must be real
models from the Model manager.

Both halves are built in a temporary folder and renamed into place, and a manifest records how; a second call
with the same version reuses them (idempotent). The same seed gives the same dataset bytes and, on the same
machine and thread count, the same weights.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..base.errors import ConfigError
from ..base.job_context import JobContext, null_context
from ..store.paths import AppPaths, get_paths

DEMO_VERSION = 1
CLASSIFIER_ID = "demo-digits-classifier"
CLASS_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
IMAGE_SIDE = 64  # the dataset's PNGs (the browser and an editor get a readable image)
ARCHITECTURE = "test_efficientnet"  # timm's smallest conv net that trains to > 95 % in seconds at 32 px
DATA_CONFIG = {"input_size": (3, 32, 32), "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5),
               "interpolation": "bicubic", "crop_pct": 1.0}
EPOCHS = 4
BATCH = 64
SEED = 0
MANIFEST = "nemo-demo.json"


@dataclass(frozen=True)
class DemoSetup:
    """Where the demo is and how it was made (what `nemo demo --json` prints)."""

    dataset_dir: Path
    classifier_dir: Path
    classifier_id: str
    classes: list[str]
    images: int
    train_images: int
    holdout_accuracy: float  # of the trained weights on the dataset's (held-out) digits, measured after training
    train_seconds: float
    reused_dataset: bool
    reused_classifier: bool
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["dataset_dir"] = str(self.dataset_dir)
        out["classifier_dir"] = str(self.classifier_dir)
        return out


NOTES = ["The demo classifier is tiny and real: timm test_efficientnet trained here on 1,437 handwritten digits; "
         "it never saw the dataset's 360 digits.",
         "A diagnosis also needs a multimodal LLM and an image editor. The demo does not fake them: download or "
         "choose real ones in the Model manager."]


def demo_root(paths: AppPaths | None = None) -> Path:
    """The demo's dataset folder lives under the user's data folder (the store's parent)."""
    return (paths or get_paths()).store_dir.parent / "demo"


def dataset_dir(paths: AppPaths | None = None) -> Path:
    return demo_root(paths) / f"digits-v{DEMO_VERSION}"


def classifier_dir(paths: AppPaths | None = None) -> Path:
    """With the app-managed weights, where the Model manager's weights folder is."""
    return (paths or get_paths()).weights_dir / "demo" / f"digits-{ARCHITECTURE}-v{DEMO_VERSION}"


def prepare_demo(paths: AppPaths | None = None, ctx: JobContext | None = None, *, register: bool = True) \
        -> DemoSetup:
    """Write the dataset and train the classifier when missing (else reuse them), and register the classifier."""
    paths = paths or get_paths()
    ctx = ctx or null_context()
    data, reused_data = ensure_dataset(dataset_dir(paths), ctx)
    model_dir, manifest, reused_model = ensure_classifier(classifier_dir(paths), ctx)
    if register:
        register_classifier(model_dir)
    return DemoSetup(dataset_dir=data, classifier_dir=model_dir, classifier_id=CLASSIFIER_ID,
                     classes=list(CLASS_NAMES), images=_read_manifest(data)["images"],
                     train_images=manifest["train_images"], holdout_accuracy=manifest["holdout_accuracy"],
                     train_seconds=manifest["train_seconds"], reused_dataset=reused_data,
                     reused_classifier=reused_model, notes=list(NOTES))


# -- the dataset ------------------------------------------------------------------------------------------------

def _glyph_fingerprint() -> str:
    import hashlib

    from ..analyses.model_diff.synthetic_digits import glyph_pool

    images, labels = glyph_pool("all")
    return hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest()[:16]


def _read_manifest(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _is_current(folder: Path, kind: str) -> bool:
    m = _read_manifest(folder)
    return m.get("kind") == kind and m.get("version") == DEMO_VERSION and m.get("glyphs") == _glyph_fingerprint()


def render(glyph: np.ndarray):
    """One digit as the demo draws it: white strokes on black (MNIST's look), IMAGE_SIDE px, RGB."""
    from ..analyses.model_diff.synthetic_digits import render_digit

    return render_digit(glyph, rgb=(0, 0, 0), size=IMAGE_SIDE, colour_target="background")


def _dataset_files_present(folder: Path, expected: int) -> bool:
    return sum(1 for _ in folder.glob("*/*.png")) == expected


def ensure_dataset(folder: Path, ctx: JobContext | None = None) -> tuple[Path, bool]:
    """(folder, reused): the `eval` pool as PNGs in one sub-folder per class name."""
    from ..analyses.model_diff.synthetic_digits import glyph_pool

    ctx = ctx or null_context()
    if _is_current(folder, "dataset") and _dataset_files_present(folder, _read_manifest(folder).get("images", -1)):
        return folder, True
    images, labels = glyph_pool("eval")
    all_index = np.flatnonzero(np.arange(len(glyph_pool("all")[1])) % 5 == 0)  # file names keep the glyph's id
    tmp = _fresh_temp(folder)
    try:
        for name in CLASS_NAMES:
            (tmp / name).mkdir()
        for n, (glyph, label, gid) in enumerate(zip(images, labels, all_index)):
            if n % 40 == 0:
                ctx.progress("Writing the demo images", n, len(labels))
                ctx.check_cancelled()
            render(glyph).save(tmp / CLASS_NAMES[int(label)] / f"digit-{int(gid):04d}.png", optimize=False)
        _write_manifest(tmp, {"kind": "dataset", "images": int(len(labels)), "pool": "eval",
                              "source": "UCI optical recognition of handwritten digits (CC BY 4.0), "
                                        "via scikit-learn, shipped in resources/model_diff/digits_8x8.npz"})
        _replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ctx.progress("Writing the demo images", len(labels), len(labels))
    return folder, False


# -- the classifier ---------------------------------------------------------------------------------------------

def _tensors(glyphs: np.ndarray, transform):
    import torch

    return torch.stack([transform(render(g)) for g in glyphs])


def train_classifier(ctx: JobContext | None = None, *, epochs: int = EPOCHS, seed: int = SEED, training=None):
    """(timm model in eval mode, measurements): trained on the `train` pool (or on `training`, a pair of PIL
    images and labels drawn from it) through the model's own eval transform, so training sees exactly what the
    loaded classifier will see."""
    import timm
    import timm.data
    import torch

    ctx = ctx or null_context()
    started = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 0.1 M-parameter net gains nothing from more; on a busy CPU they spin (7 min vs 15 s)
    try:
        return _train(ctx, epochs, seed, started, training)
    finally:
        torch.set_num_threads(threads)


def _train(ctx: JobContext, epochs: int, seed: int, started: float, training=None):
    import timm
    import timm.data
    import torch

    from ..analyses.model_diff.synthetic_digits import glyph_pool

    torch.manual_seed(seed)
    model = timm.create_model(ARCHITECTURE, pretrained=False, num_classes=len(CLASS_NAMES))
    cfg = timm.data.resolve_model_data_config(model, args=dict(DATA_CONFIG))
    transform = timm.data.create_transform(**cfg, is_training=False)
    ctx.progress("Rendering the training digits", 0, None)
    if training is None:
        train_glyphs, train_labels = glyph_pool("train")
        x = _tensors(train_glyphs, transform)
    else:
        images, train_labels = training
        x = torch.stack([transform(im.convert("RGB")) for im in images])
    y = torch.as_tensor(np.asarray(train_labels), dtype=torch.long)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    steps = epochs * ((len(x) + BATCH - 1) // BATCH)
    step = 0
    for _ in range(epochs):
        model.train()
        order = torch.randperm(len(x), generator=gen)
        for s in range(0, len(x), BATCH):
            ctx.check_cancelled()
            idx = order[s:s + BATCH]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
            step += 1
            ctx.progress("Training the demo classifier", step, steps)
    model.eval()
    ctx.progress("Measuring on held-out digits", 0, 1)
    eval_glyphs, eval_labels = glyph_pool("eval")
    with torch.inference_mode():
        pred = model(_tensors(eval_glyphs, transform)).argmax(1).numpy()
    measured = {"train_images": int(len(x)), "epochs": int(epochs), "seed": int(seed),
                "holdout_accuracy": round(float((pred == eval_labels).mean()), 4),
                "holdout_images": int(len(eval_labels)), "train_seconds": round(time.perf_counter() - started, 2),
                "torch": torch.__version__, "timm": timm.__version__}
    return model, measured


def ensure_classifier(folder: Path, ctx: JobContext | None = None, *, kind: str = "classifier", train=None,
                      about: dict[str, Any] | None = None) -> tuple[Path, dict[str, Any], bool]:
    """(folder, manifest, reused): a timm `save_for_hf` folder (config.json + model.safetensors). `train(ctx)`
    makes (model, measurements) (default: the demo classifier's training); `kind` and `about` go in the
    manifest."""
    from timm.models import save_for_hf

    ctx = ctx or null_context()
    if _is_current(folder, kind) and (folder / "model.safetensors").is_file() \
            and (folder / "config.json").is_file():
        return folder, _read_manifest(folder), True
    model, measured = (train or train_classifier)(ctx)
    tmp = _fresh_temp(folder)
    try:
        save_for_hf(model, str(tmp), model_config={"label_names": list(CLASS_NAMES)},
                    data_config=dict(DATA_CONFIG), safe_serialization=True)
        _write_manifest(tmp, {"kind": kind, "architecture": ARCHITECTURE, **(about or {}), **measured})
        _replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder, _read_manifest(folder), False


def catalog_entry(folder: Path) -> dict[str, Any]:
    """The user-catalog entry of the trained classifier (a local timm folder)."""
    folder = Path(folder).resolve()
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    m = _read_manifest(folder)
    return {"id": CLASSIFIER_ID, "kind": "classifier", "family": "timm", "repo": str(folder),
            "source": f"local-dir:{folder}", "revision": "local",
            "license": "trained locally on UCI handwritten digits (CC BY 4.0)", "gated": False,
            "disk_size_bytes": max(1, size), "vram_bf16_gb": 0.1, "recommended_gpu": "any (CPU is fine)",
            "parameters": None, "description": "Demo: a tiny digit classifier trained on this computer "
                                                f"({m.get('holdout_accuracy', 0) * 100:.1f}% on held-out digits)",
            "notes": "Built by 'Try the demo' / `nemo demo` from the handwritten digits that ship with NEMO "
                     "Desktop. Real but tiny; explaining its mistakes still needs a real multimodal LLM and "
                     "image editor."}


def register_classifier(folder: Path):
    from ..models.user_catalog import put_user_entry

    return put_user_entry(catalog_entry(folder))


# -- atomic folders ---------------------------------------------------------------------------------------------

def _fresh_temp(folder: Path) -> Path:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)  # what a crashed earlier build left
    tmp.mkdir()
    return tmp


def _write_manifest(folder: Path, data: dict[str, Any]) -> None:
    record = {"version": DEMO_VERSION, "glyphs": _glyph_fingerprint(), **data}
    (folder / MANIFEST).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def _replace(tmp: Path, folder: Path) -> None:
    """Move the finished build into place; an outdated build is set aside first, then removed."""
    old = folder.with_name(f".{folder.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        if not folder.is_dir():
            raise ConfigError(f"{folder} is in the way of the demo.", hint="Move or delete it, then try again.")
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
