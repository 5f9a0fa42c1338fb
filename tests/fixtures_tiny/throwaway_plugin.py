"""A throw-away analysis registered the way a third party registers one: a distribution `nemo-throwaway` (a
package plus a `*.dist-info` folder whose entry_points.txt names it in `nemo_desktop.analyses`, read by
importlib.metadata exactly as pip's would be). Put `write_throwaway_dist(root)` on sys.path (or PYTHONPATH) and
reset the plugins (`nemo_desktop.core.base.plugins._reset_for_tests()`).

The analysis, `tiny-count`, is a dataset analysis that counts the images of each class folder, one class per unit
of work (so a cancel has units), and keeps its result in the store under a key of the folder's content and its
settings (so a re-run is answered from the store). It passes every check of the pytest plugin
`nemo_desktop.testing`, which is what tests/core/test_testing_plugin.py shows.
"""
from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

DIST = "nemo-throwaway"
ANALYSIS = "tiny-count"

_MODULE = '''
import time
from dataclasses import dataclass, field
from pathlib import Path

from nemo_desktop.core.registry import AnalysisSpec, Inputs

CALLS = []  # one entry per class folder counted: what a re-run from the store does not do


@dataclass(frozen=True)
class CountConfig:
    min_images: int = field(default=1, metadata={"label": "Minimum images",
                                                 "help": "classes with fewer images are left out",
                                                 "min": 0, "max": 1000})
    suffix: str = field(default=".png", metadata={"label": "Image suffix", "choices": (".png", ".jpg")})
    wait_s: float = field(default=0.0, metadata={"label": "Wait per class", "help": "seconds (cancellable)",
                                                 "min": 0.0, "max": 60.0})


@dataclass
class CountResult:
    counts: dict
    key: str = None
    manifest: dict = field(default_factory=dict)
    kind = "dataset"
    analysis = "tiny-count"

    def to_dict(self):
        return {"counts": self.counts, "key": self.key, "manifest": self.manifest}

    @classmethod
    def from_dict(cls, d):
        return cls(dict(d["counts"]), d.get("key"), dict(d.get("manifest") or {}))


class TinyCount:
    def __init__(self, store=None, config=None):
        self.store, self.config = store, config or CountConfig()

    def __call__(self, folder, ctx):
        from dataclasses import asdict

        from nemo_desktop.core.store import result_key

        classes = sorted(p for p in Path(folder).iterdir() if p.is_dir())
        files = sorted(str(f.relative_to(folder)) for d in classes for f in d.glob("*" + self.config.suffix))
        key = result_key("tiny-count", files=files, config=asdict(self.config), version="1")
        stored = self.store.get(key) if self.store is not None else None
        if stored is not None:
            return CountResult.from_dict(stored.payload)
        counts = {}
        for i, d in enumerate(classes):
            ctx.check_cancelled()
            ctx.progress("Counting", i, len(classes), d.name)
            waited = 0.0
            while waited < self.config.wait_s:
                ctx.check_cancelled()
                ctx.cancel_token.wait(0.05)
                waited += 0.05
            CALLS.append(d.name)
            n = len(list(d.glob("*" + self.config.suffix)))
            if n >= self.config.min_images:
                counts[d.name] = n
        ctx.check_cancelled()
        ctx.progress("Counting", len(classes), len(classes))
        result = CountResult(counts, key, {"config": asdict(self.config)})
        if self.store is not None:
            self.store.put(key, "tiny-count", result.to_dict())
        return result


ANALYSES = (AnalysisSpec("tiny-count", "dataset", "1", TinyCount, CountConfig, result=CountResult,
                         inputs=Inputs(classifier="none", data="dataset"),
                         description="Images per class folder (a throw-away plugin analysis)."),)
'''


def installed(tmp_path: Path, monkeypatch) -> Iterator[Path]:
    """The body of a pytest fixture: the distribution on sys.path and the plugins loaded afresh; undone after."""
    from nemo_desktop.core.base import plugins

    root = write_throwaway_dist(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    plugins._reset_for_tests()
    yield root
    plugins._reset_for_tests()
    sys.modules.pop("nemo_throwaway", None)


def write_throwaway_dist(root: str | Path) -> Path:
    """Write the distribution under `root` (returns `root`, the folder to put on sys.path)."""
    root = Path(root)
    pkg = root / "nemo_throwaway"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(_MODULE)
    info = root / "nemo_throwaway-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[nemo_desktop.analyses]\n{ANALYSIS} = nemo_throwaway:ANALYSES\n")
    (info / "top_level.txt").write_text("nemo_throwaway\n")
    return root


def write_class_folders(root: str | Path, counts: dict[str, int]) -> Path:
    from PIL import Image

    root = Path(root)
    for name, n in counts.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.new("RGB", (4, 4), (i * 30, 0, 0)).save(root / name / f"{i}.png")
    return root
