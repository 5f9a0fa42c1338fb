"""A tiny third-party plugin distribution, `nemo-tiny-plugin`, written as an installed distribution would be: a
package plus a `*.dist-info` folder with METADATA and entry_points.txt, which importlib.metadata reads exactly as
it reads the dist-info pip writes into site-packages. Put the folder on sys.path (or PYTHONPATH for a child
process) and NEMO Desktop finds its entry points.

It declares, in `nemo_desktop.model_families`:
  - `tiny-colour`: classifier family 'tiny-colour' (classes red, green, blue from the image's mean colour; numpy
    only). Source 'slow:<seconds>' sleeps that long per image (cancellation tests).
  - `broken-family`: a module that raises on import (must be reported by name and skipped).
and in `nemo_desktop.analyses`:
  - `tiny-caption`: per-sample method 'tiny-caption' (an AnalysisSpec object): 'explains' with the mean colour,
    stores its result with the input image as evidence; setting `wait_s` waits (cancellably) first.
  - `tiny-brightness`: a tuple of specs: 'tiny-brightness', a per-sample analysis that is not an explanation
    method (so the app lists it in the Analyses pane).
  - `broken-analysis`: an attribute that does not exist (reported and skipped).
"""
from __future__ import annotations

from pathlib import Path

DIST = "nemo-tiny-plugin"
FAMILY = "tiny-colour"
METHOD = "tiny-caption"

_PACKAGE = '''
"""nemo-tiny-plugin: a model family and an explanation method for NEMO Desktop, from outside it."""
'''

_FAMILY = '''
import hashlib
import time

import numpy as np

from nemo_desktop.core.models.protocols import ModelInfo
from nemo_desktop.core.models.families import register_family

CLASSES = ["red", "green", "blue"]


class ColourClassifier:
    zero_shot = False
    class_names = CLASSES

    def __init__(self, spec):
        self.delay = float(spec.source.split(":", 1)[1]) if spec.source.startswith("slow:") else 0.0
        self.info = ModelInfo(model_id=spec.model_id, family="tiny-colour",
                              revision=hashlib.sha256(spec.source.encode()).hexdigest()[:12])

    def _means(self, images):
        return np.stack([np.asarray(im.convert("RGB"), np.float32).reshape(-1, 3).mean(0) / 255.0
                         for im in images])

    def predict_proba(self, images, *, class_prompts=None):
        if class_prompts:
            raise ValueError("not a zero-shot classifier")
        out = []
        for im in images:
            if self.delay:
                time.sleep(self.delay)
            z = self._means([im])[0] * 8.0
            e = np.exp(z - z.max())
            out.append(e / e.sum())
        return np.asarray(out, np.float32)

    def embed(self, images):
        m = self._means(images) + 1e-6
        return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)

    def preprocess(self, images):
        raise NotImplementedError("no differentiable forward pass")

    def forward_logits(self, pixel_values):
        raise NotImplementedError("no differentiable forward pass")


@register_family("classifier", "tiny-colour")
def load(spec, options):
    return ColourClassifier(spec)
'''

_METHOD = '''
from dataclasses import dataclass, field

from nemo_desktop.core.methods.labels import resolve_label
from nemo_desktop.core.base.records import ClassScore, ExplanationResult, SampleInfo
from nemo_desktop.core.registry import AnalysisSpec, Inputs


@dataclass(frozen=True)
class TinyCaptionConfig:
    wait_s: float = field(default=0.0, metadata={"label": "Wait", "help": "seconds to wait first (cancellable)",
                                                 "min": 0.0, "max": 600.0})
    shout: bool = field(default=False, metadata={"help": "write the explanation in capitals"})


class TinyCaption:
    def __init__(self, classifier, store=None, config=None):
        self.classifier, self.store, self.config = classifier, store, config or TinyCaptionConfig()

    def __call__(self, image, true_label, ctx=None):
        from PIL import Image

        from nemo_desktop.core.base.job_context import JobContext
        from nemo_desktop.core.store import content_hash, result_key

        ctx = ctx or JobContext()
        waited = 0.0
        while waited < self.config.wait_s:
            ctx.check_cancelled()
            ctx.progress("Waiting", int(waited * 10), int(self.config.wait_s * 10))
            ctx.cancel_token.wait(0.1)
            waited += 0.1
        ctx.check_cancelled()
        im = Image.open(image).convert("RGB")
        names = list(self.classifier.class_names)
        true_index = resolve_label(true_label, names)
        p = self.classifier.predict_proba([im])[0]
        pred = int(p.argmax())
        top = [ClassScore(int(i), names[i], float(p[i])) for i in p.argsort()[::-1]]
        text = f"The image is mostly {names[pred]}, not {names[true_index]}."
        sha = content_hash(image)
        sample = SampleInfo(str(image), sha, true_index, names[true_index], pred, names[pred],
                            float(p[true_index]), float(p[pred]), top, image_artifact="image")
        result = ExplanationResult("tiny-caption", sample, explanation=text.upper() if self.config.shout else text,
                                   evidence={"Input image": "image"},
                                   manifest={"models": {"classifier": {"id": self.classifier.info.model_id}}})
        ctx.progress("Explaining", 1, 1)
        if self.store is not None:
            key = result_key("explanation", method="tiny-caption", image=sha, label=true_index,
                             model=self.classifier.info.model_id, shout=self.config.shout)
            result.result_key = key
            self.store.put(key, "explanation", result.to_dict(), artifacts={"image": im})
        return result


@dataclass
class BrightnessResult:
    brightness: float
    manifest: dict = field(default_factory=dict)
    kind = "sample"
    analysis = "tiny-brightness"
    key = None

    def to_dict(self):
        return {"brightness": self.brightness, "manifest": self.manifest}

    @classmethod
    def from_dict(cls, d):
        return cls(**d)


class TinyBrightness:
    def __init__(self, classifier=None, store=None, config=None):
        pass

    def __call__(self, image, ctx=None):
        from PIL import Image

        return BrightnessResult(float(sum(Image.open(image).convert("L").getdata())) / 255.0)


BRIGHTNESS = (AnalysisSpec("tiny-brightness", "sample", "1", TinyBrightness, None, result=BrightnessResult,
                           inputs=Inputs(classifier="none"), description="Mean brightness of an image (plugin)."),)


SPEC = AnalysisSpec("tiny-caption", "sample", "1", TinyCaption, TinyCaptionConfig, result=ExplanationResult,
                    inputs=Inputs(classifier="required"),
                    description="Names the image's dominant colour (a plugin from nemo-tiny-plugin).")
'''

_ENTRY_POINTS = f'''[nemo_desktop.model_families]
broken-family = nemo_tiny_plugin.broken
tiny-colour = nemo_tiny_plugin.family

[nemo_desktop.analyses]
broken-analysis = nemo_tiny_plugin.method:NO_SUCH_SPEC
tiny-brightness = nemo_tiny_plugin.method:BRIGHTNESS
tiny-caption = nemo_tiny_plugin.method:SPEC
'''


def write_plugin_dist(root: str | Path) -> Path:
    """Write the distribution under `root` (returns `root`, the folder to put on sys.path)."""
    root = Path(root)
    pkg = root / "nemo_tiny_plugin"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(_PACKAGE)
    (pkg / "family.py").write_text(_FAMILY)
    (pkg / "method.py").write_text(_METHOD)
    (pkg / "broken.py").write_text('raise ImportError("nemo_tiny_plugin.broken needs a library that is missing")\n')
    info = root / "nemo_tiny_plugin-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(_ENTRY_POINTS)
    (info / "top_level.txt").write_text("nemo_tiny_plugin\n")
    return root


def write_plugin_project(root: str | Path) -> Path:
    """The same plugin as a source project (pyproject.toml with its entry points), for `pip install`."""
    root = Path(root)
    write_plugin_dist(root)
    for info in root.glob("*.dist-info"):  # pip writes its own
        for f in info.iterdir():
            f.unlink()
        info.rmdir()
    groups: dict[str, list[str]] = {}
    group = None
    for line in _ENTRY_POINTS.splitlines():
        if line.startswith("["):
            group = line.strip("[]")
        elif line.strip() and group:
            groups.setdefault(group, []).append(line)
    toml = [f'[project]\nname = "{DIST}"\nversion = "0.1"\n',
            '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
            '[tool.setuptools]\npackages = ["nemo_tiny_plugin"]\n']
    for g, lines in groups.items():
        toml.append(f'[project.entry-points."{g}"]\n' + "".join(
            f'{n.strip()} = "{v.strip()}"\n' for n, v in (ln.split("=", 1) for ln in lines)))
    (root / "pyproject.toml").write_text("\n".join(toml))
    return root
