"""Fixtures for the benchmark tests: tiny datasets in their real layouts, a store, doubles by model label."""
from __future__ import annotations

import pytest

from bench_world import (FAMILY, families, load_double, make_imagenet_d, make_imagenet_r, make_imagenet_val,
                         make_objectnet)
from nemo_desktop.core.models.registry import ModelSpec


@pytest.fixture(scope="session")
def bench_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-data")
    val_wnids = ["n01532829", "n01843383", "n02747177", "n03196217", "n01440764"]  # mini, mini+R, mini+ObjectNet, -, -
    return {"imagenet-r": make_imagenet_r(root), "objectnet": make_objectnet(root), "imagenet-d": make_imagenet_d(root),
            "val": make_imagenet_val(root, val_wnids), "val_wnids": val_wnids}


@pytest.fixture
def store(tmp_path):
    from nemo_desktop.core.store import ResultsStore

    s = ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite", artifacts_dir=tmp_path / "store" / "artifacts")
    yield s
    s.close()


@pytest.fixture
def registered(monkeypatch):
    """The test doubles as model family 'test-double' of the registry, for this test only."""
    from nemo_desktop.core.models import registry

    registry._ensure_builtin_families()
    for key, fn in families().items():
        monkeypatch.setitem(registry._FAMILIES, key, fn)


def doubles_loader(made: dict | None = None):
    """A runner loader that builds the doubles a config names (test-double:<what>) and keeps them by label."""
    made = made if made is not None else {}

    def load(ref):
        r = ref.ref
        spec = ModelSpec(ref.kind, FAMILY, r.split(":", 1)[1]) if isinstance(r, str) else \
            ModelSpec(ref.kind, r["family"], r["source"], options=dict(r.get("options") or {}))
        if spec.family == FAMILY:
            obj = load_double(spec)
        else:  # a real adapter (e.g. openai-compatible against a loopback server)
            from nemo_desktop.core.models.registry import LoadOptions, load_model

            obj = load_model(spec, LoadOptions(device="cpu"))
        made.setdefault(ref.label, []).append(obj)
        return obj

    return load


def base_config(data: dict, **over) -> dict:
    cfg = {
        "name": "tiny",
        "seed": 3,
        "samples_per_dataset": 2,
        "imagenet_subset": {"root": str(data["val"]), "classes": "mini-imagenet"},
        "datasets": [{"kind": "imagenet-r", "root": str(data["imagenet-r"]["root"])},
                     {"kind": "objectnet", "root": str(data["objectnet"]["root"])},
                     {"kind": "imagenet-d", "root": str(data["imagenet-d"]["root"])}],
        "classifiers": {"ViT": "test-double:coded-imagenet", "CLIP": "test-double:coded-zero-shot"},
        "mllms": {"Qwen": "test-double:scripted"},
        "editors": {"Kontext": "test-double:restoring"},
        "methods": [{"label": "SciTX", "method": "scitx",
                     "options": {"k": 1, "m": 2, "edit_steps": 1, "thumbnail_side": 16}}],
        "judges": {"GPT": "test-double:judge-gpt-fenced", "Claude": "test-double:judge-claude-fraction",
                   "Gemini": "test-double:judge-gemini-stubborn"},
    }
    cfg.update(over)
    return cfg
