"""Fixtures for the benchmark tests: tiny datasets in their real layouts, a store, doubles by model label."""
from __future__ import annotations

import pytest

from bench_world import FixedConfig, FixedExplainer, families, make_imagenet_d, make_imagenet_r, make_imagenet_val, make_objectnet


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
    from nemo_desktop.core.models import families as registry

    registry._ensure_builtin_families()
    for key, fn in families().items():
        monkeypatch.setitem(registry._FAMILIES, key, fn)


@pytest.fixture
def fixed_method(monkeypatch):
    """The test double FixedExplainer as per-sample method 'fixed', for this test only."""
    from nemo_desktop.core.registry import AnalysisSpec, Inputs, list_analyses
    from nemo_desktop.core.registry import registry

    list_analyses()  # the built-in analyses first, so the double is only added
    monkeypatch.setitem(registry._SPECS, "fixed",
                        AnalysisSpec("fixed", "sample", "test", FixedExplainer, FixedConfig,
                                     inputs=Inputs(mllm="optional", editor="optional"), description="test double"))
