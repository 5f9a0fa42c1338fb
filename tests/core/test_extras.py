"""Optional capabilities (issue 31, "complete and lean"): what only one capability needs is a pip extra named by
what it enables; a capability whose extra is missing is refused before anything runs, naming the extra."""
from __future__ import annotations

import pytest

from nemo_desktop.core.base import extras
from nemo_desktop.core.models import family_extras
from nemo_desktop.core.base.extras import EXTRAS, MissingExtraError




def _distributions(*names):
    import re
    import tomllib
    from pathlib import Path

    table = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    deps = table["project"]["optional-dependencies"]
    return {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower().replace("_", "-") for n in names for d in deps[n]}


def test_the_development_environment_has_every_extra():
    """`.[gui,test]` (CI, scripts/_env.sh) is complete: the suite exercises every capability it installs (the
    gui extras and the opt-in ones whose packages `test` holds)."""
    import importlib.metadata as md

    owners = md.packages_distributions()
    covered = _distributions("gui", "test")
    wanted = [e.name for e in EXTRAS.values()
              if all({d.lower().replace("_", "-") for d in owners.get(m, [m])} & covered for m in e.modules)]
    assert {"editing", "competency", "pdf", "tokens", "parquet", "quantize", "fix", "mcp", "ray"} <= set(wanted)
    assert [row["extra"] for row in extras.status() if not row["installed"] and row["extra"] in wanted] == []


def test_every_extra_of_pyproject_is_listed():
    """Issue 42 §4: `nemo doctor` lists every extra pyproject.toml declares (the meta extras gui, all and test
    bundle the others; docs builds the documentation site, no capability)."""
    import tomllib
    from pathlib import Path

    declared = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    names = set(declared["project"]["optional-dependencies"]) - {"gui", "all", "test", "docs"}
    assert names == set(EXTRAS) and len(names) == 12
    assert {row["extra"] for row in extras.status()} == names
    assert {e.name for e in EXTRAS.values() if e.in_gui} == {"editing", "competency", "pdf", "tokens", "parquet", "quantize"}
    assert {e.name for e in EXTRAS.values() if not e.in_all} == {"fiftyone"}


def test_a_missing_extra_is_a_usage_error_naming_the_pip_install(without):
    without("pdf")
    assert not extras.available("pdf") and extras.available("competency")
    with pytest.raises(MissingExtraError) as err:
        extras.require("pdf", "PDF export")
    assert "'pdf' extra" in err.value.message and "fpdf" in err.value.message
    assert "pip install 'nemo-desktop[pdf]'" in err.value.hint
    from nemo_desktop.cli.output import exit_code_for

    assert exit_code_for(err.value) == 2
    row = next(r for r in extras.status() if r["extra"] == "pdf")
    assert not row["installed"] and row["enables"] and row["without"] and row["install"].endswith("[pdf]'")


def test_diffusers_models_need_the_editing_extra_before_their_loader_runs(without, monkeypatch):
    from nemo_desktop.core.models import families as registry

    assert extras.extra_for_family("diffusers-flux-kontext") == "editing" and extras.extra_for_family("timm") is None
    without("editing")
    called = []
    monkeypatch.setattr(registry, "get_loader", lambda kind, family: lambda *a: called.append(a))
    with pytest.raises(MissingExtraError, match="'editing' extra"):
        registry.load_model(registry.ModelSpec(kind="editor", family="diffusers-flux-kontext", source="x/y"))
    assert called == []
    assert family_extras.extra_for_ref("flux-kontext-dev", "editor") == "editing"
    assert family_extras.extra_for_ref("qwen2.5-vl-7b", "mllm") is None and family_extras.extra_for_ref(None, "editor") is None


def test_an_analysis_declares_its_extras(without):
    from nemo_desktop.core.registry import get_analysis

    bench = get_analysis("competency-bench")
    assert bench.extras == ("competency",)
    extras.require_for_spec(get_analysis("competency-score"))  # needs none
    without("competency")
    with pytest.raises(MissingExtraError, match="competency-bench needs the 'competency' extra"):
        extras.require_for_spec(bench)


def test_lpips_without_the_extra_is_unavailable_not_a_crash(without):
    from nemo_desktop.core.analyses.competency.lpips_distance import MetricUnavailable, load_lpips

    without("competency")
    with pytest.raises(MetricUnavailable) as err:
        load_lpips("alex")
    assert "nemo-desktop[competency]" in err.value.hint


def test_a_benchmark_config_with_a_diffusers_editor_fails_preflight_without_the_extra(without):
    from nemo_desktop.core.benchmark.config import ModelRef
    from nemo_desktop.core.benchmark.preflight import _check_model

    _check_model(ModelRef("Kontext", "editor", "flux-kontext-dev"))  # installed here: fine
    without("editing")
    with pytest.raises(MissingExtraError, match="'editing' extra"):
        _check_model(ModelRef("Kontext", "editor", "flux-kontext-dev"))
