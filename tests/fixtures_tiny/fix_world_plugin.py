"""The fix loop's planted-shortcut world (benchmarks/fix_world.py) as models another process can load: a plugin
distribution, `nemo-fix-world-plugin`, whose 'fix-world' classifier and editor families read a world saved by
`save_world` (the CNN's weights as safetensors, the editor's scene memory as JSON). The editor is the world's test
double (it re-renders its own training images with the named attribute changed); it ships with no product.

    site = write_fix_world_plugin(tmp / "site")          # put on the server's PYTHONPATH
    save_world(world, data / "world")                    # classifier and editor: "fix-world:<data>/world"
    write_fix_folder(world, data / "fix")                # train/, affected/, rest/ with a folder per class
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
DIST = "nemo-fix-world-plugin"

_FAMILY = '''
import json
import sys
from pathlib import Path
from types import SimpleNamespace

from nemo_desktop.core.models.families import register_family

sys.path.insert(0, {benchmarks!r})
import fix_world as FW  # noqa: E402
import known_cause_worlds as W  # noqa: E402


def _folder(spec):
    return Path(spec.source)


@register_family("classifier", "fix-world")
def load_classifier(spec, options):
    from safetensors.torch import load_file

    folder = _folder(spec)
    meta = json.loads((folder / "world.json").read_text())
    model = FW._cnn()
    model.load_state_dict(load_file(str(folder / "model.safetensors")))
    return W.WorldClassifier(model.eval(), meta["world"])


@register_family("editor", "fix-world")
def load_editor(spec, options):
    meta = json.loads((_folder(spec) / "world.json").read_text())
    scenes = {{sha: W.Scene(**{{**s, "shift": tuple(s["shift"])}}) for sha, s in meta["scenes"].items()}}
    return FW.FixWorldEditor(SimpleNamespace(scenes=scenes))
'''


def write_fix_world_plugin(root: str | Path) -> Path:
    """The distribution under `root` (the folder to put on sys.path / PYTHONPATH)."""
    root = Path(root)
    pkg = root / "nemo_fix_world_plugin"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('"""The fix world as NEMO model families (a test double)."""\n')
    (pkg / "family.py").write_text(_FAMILY.format(benchmarks=str(BENCHMARKS)))
    info = root / "nemo_fix_world_plugin-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[nemo_desktop.model_families]\nfix-world = nemo_fix_world_plugin.family\n")
    return root


def save_world(world, folder: str | Path) -> Path:
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in world.classifier.model.state_dict().items()},
              str(folder / "model.safetensors"))
    name = world.classifier.info.model_id.split(":", 1)[1].removesuffix("-cnn")
    (folder / "world.json").write_text(json.dumps({"world": name, "scenes": {
        sha: asdict(s) for sha, s in world.scenes.items()}}))
    return folder


def write_fix_folder(world, folder: str | Path) -> Path:
    """The world's three sets as PNG class folders (lossless: the editor still recognises its images)."""
    import known_cause_worlds as W

    folder = Path(folder)
    for split in ("train", "affected", "rest"):
        for i, (image, label) in enumerate(getattr(world, split)):
            d = folder / split / W.CLASS_NAMES[label]
            d.mkdir(parents=True, exist_ok=True)
            image.save(d / f"{i:05d}.png")
    return folder
