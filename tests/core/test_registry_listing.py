"""Listing the analysis registry is cheap: the Analyses page and `nemo explain --help` read every entry's name, kind,
inputs and settings, and none of that may import torch or scipy (competency's estimator alone took seconds).
A factory named by import path (LazyFactory) is imported when the analysis is built."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from nemo_desktop.core.registry import AnalysisSpec, Components, build_analysis, get_analysis
from nemo_desktop.core.registry.spec import LazyFactory

ROOT = Path(__file__).resolve().parents[2]

# What the Analyses page reads for every entry (core/app/jobs/analyses.py: list_page_analyses, the settings
# form from config_params, the component pickers from inputs.used()), then which heavy modules are loaded.
LISTING = r"""
import json, sys
from nemo_desktop.core.registry import config_params, get_analysis, list_analyses
from nemo_desktop.core.registry.registry import BUILTIN_MODULES

specs = [get_analysis(n) for n in list_analyses()]
forms = {s.name: ([p.name for p in config_params(s.config)] if s.config else [], s.inputs.used(), s.version)
         for s in specs}
heavy = ("torch", "scipy", "torchvision", "torchmetrics", "torch_fidelity", "lpips", "transformers",
         "diffusers", "sklearn", "nemo_desktop.core.analyses.competency.estimator",
         "nemo_desktop.core.analyses.competency.bench", "nemo_desktop.core.analyses.competency.parce")
print(json.dumps({"names": sorted(forms), "forms": forms, "heavy": [m for m in heavy if m in sys.modules],
                  "builtin_loaded": all(m in sys.modules for m in BUILTIN_MODULES)}))
"""


def _listing() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", LISTING], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_listing_the_registry_imports_no_heavy_module():
    listed = _listing()
    assert listed["builtin_loaded"]  # every built-in analysis module was imported: all entries are there
    assert {"competency-estimator", "competency-cf", "competency-bench", "competency-score", "scitx",
            "failure-modes", "model-diff", "global-explanation"} <= set(listed["names"])
    assert listed["heavy"] == [], f"listing the registry imported {listed['heavy']}"
    # The competency entries still carry their full settings (the form) without the pipeline module.
    params, roles, version = listed["forms"]["competency-bench"]
    assert {"methods", "threshold", "max_images", "feature_space"} <= set(params)
    assert roles == ["classifier", "fitted"] and version == "1"


def test_lazy_factory_is_imported_on_build_and_matches_the_pipeline_module():
    from nemo_desktop.core.analyses.competency import bench, counterfactual, fit

    spec = get_analysis("competency-bench")
    assert isinstance(spec.factory, LazyFactory)
    assert spec.factory.load() is bench.CompetencyBenchAnalysis
    assert spec.config is bench.CompetencyBenchConfig  # one config class, re-exported where it runs
    # The versions the registry lists are the ones the pipelines put in their keys.
    assert (spec.version, get_analysis("competency-cf").version, get_analysis("competency-estimator").version) == \
        (bench.VERSION, counterfactual.VERSION, fit.VERSION)


def test_lazy_factory_builds_through_the_one_construction_path():
    # SimpleNamespace takes any keyword arguments: it shows exactly what build_analysis passed to the factory.
    spec = AnalysisSpec(name="lazy-probe", kind="dataset", version="1", factory="types:SimpleNamespace")
    clf = object()
    built = build_analysis(spec, Components(classifier=clf))
    assert isinstance(built, SimpleNamespace)
    assert vars(built) == {"classifier": clf, "store": None, "config": None}
    assert spec.factory == LazyFactory("types:SimpleNamespace")


@pytest.mark.parametrize("path", ["no_colon.module", ":Name", "module:", ""])
def test_a_malformed_factory_path_is_refused(path):
    with pytest.raises(ValueError, match="package.module:Name"):
        AnalysisSpec(name="bad", kind="dataset", version="1", factory=path)


def test_an_unknown_factory_path_fails_on_build_with_the_import_error():
    spec = AnalysisSpec(name="missing", kind="dataset", version="1", factory="nemo_desktop.no_such_module:X")
    with pytest.raises(ModuleNotFoundError):
        spec.factory()
