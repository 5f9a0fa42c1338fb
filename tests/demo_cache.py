"""The first-run demo built once per test process (training takes seconds to a minute on a busy CPU) and copied
into each test's NEMO_HOME, so tests that are not about training still load the real trained classifier."""
from __future__ import annotations

import shutil
import tempfile
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def built_demo() -> tuple[Path, Path, dict]:
    """(dataset folder, classifier folder, setup dict) of a demo built in a private folder, unregistered."""
    from nemo_desktop.core.demo.digits import prepare_demo
    from nemo_desktop.core.store.paths import get_paths

    paths = get_paths(home=tempfile.mkdtemp(prefix="nemo-demo-cache-"))
    setup = prepare_demo(paths, register=False)
    return setup.dataset_dir, setup.classifier_dir, setup.to_dict()


def install_built_demo(paths) -> dict:
    """Copy the cached build where `paths` keeps the demo (prepare_demo then reuses it)."""
    from nemo_desktop.core.demo.digits import classifier_dir, dataset_dir

    data, model, setup = built_demo()
    for src, dst in ((data, dataset_dir(paths)), (model, classifier_dir(paths))):
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst)
    return setup
