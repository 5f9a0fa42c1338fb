"""Plugin entry points (core/base/plugins.py) with a tiny plugin distribution on sys.path (a dist-info folder with
entry_points.txt, read by importlib.metadata as pip's would be): its family and method reach the registries,
`nemo models list`, `nemo explain --help`, the Analyses pane's list and a Ray-less worker process; its broken
entry points are reported by name and skipped."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from PIL import Image

from fixtures_tiny.plugin_dist import DIST, FAMILY, METHOD, write_plugin_dist


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    from nemo_desktop.core.base import plugins

    root = write_plugin_dist(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    plugins._reset_for_tests()
    yield root
    plugins._reset_for_tests()
    for mod in [m for m in sys.modules if m.startswith("nemo_tiny_plugin")]:
        del sys.modules[mod]


def test_plugin_family_and_method_are_registered_and_broken_ones_skipped(plugin):
    from nemo_desktop.core.registry.methods import list_methods
    from nemo_desktop.core.models.families import list_families
    from nemo_desktop.core.base.plugins import list_plugins, plugin_problems
    from nemo_desktop.core.registry import get_analysis, list_analyses

    assert ("classifier", FAMILY) in list_families("classifier")
    assert METHOD in list_methods() and get_analysis(METHOD).description.startswith("Names the image")
    list_analyses()
    by_name = {p.name: p for p in list_plugins()}
    assert by_name["tiny-colour"].ok and by_name["tiny-colour"].registered == ("classifier:tiny-colour",)
    assert by_name["tiny-colour"].dist == DIST
    assert by_name["tiny-caption"].ok and by_name["tiny-caption"].registered == ("tiny-caption",)
    assert by_name["tiny-brightness"].registered == ("tiny-brightness",)
    problems = {p.name: p.error for p in plugin_problems()}
    assert set(problems) == {"broken-family", "broken-analysis"}
    assert "ImportError" in problems["broken-family"] and "missing" in problems["broken-family"]
    assert "NO_SUCH_SPEC" in problems["broken-analysis"]


def test_plugin_family_loads_and_its_method_runs(plugin, tmp_path):
    from nemo_desktop.core.models.catalog import resolve_model_ref
    from nemo_desktop.core.models.families import load_model
    from nemo_desktop.core.registry import Components, build_analysis
    from nemo_desktop.core.store import ResultsStore

    clf = load_model(resolve_model_ref(f"{FAMILY}:plain", "classifier"))
    img = tmp_path / "red.png"
    Image.new("RGB", (8, 8), (250, 10, 10)).save(img)
    assert clf.class_names[int(clf.predict_proba([Image.open(img)])[0].argmax())] == "red"
    store = ResultsStore.open(db_path=tmp_path / "s" / "r.sqlite", artifacts_dir=tmp_path / "s" / "a")
    try:
        method = build_analysis(METHOD, Components(classifier=clf, store=store), {"shout": True})
        result = method(img, "blue")
        assert result.explanation == "THE IMAGE IS MOSTLY RED, NOT BLUE." and store.get(result.result_key)
    finally:
        store.close()


def test_a_plugin_cannot_take_a_builtin_name(tmp_path, monkeypatch):
    from nemo_desktop.core.base import plugins
    from nemo_desktop.core.registry import get_analysis

    root = tmp_path / "site"
    (root / "evil_plugin").mkdir(parents=True)
    (root / "evil_plugin" / "__init__.py").write_text(
        "from nemo_desktop.core.registry import AnalysisSpec\n"
        "SPEC = AnalysisSpec('scitx', 'sample', '9', lambda **kw: None)\n")
    info = root / "evil_plugin-1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil-plugin\nVersion: 1\n")
    (info / "entry_points.txt").write_text("[nemo_desktop.analyses]\nscitx = evil_plugin:SPEC\n")
    monkeypatch.syspath_prepend(str(root))
    plugins._reset_for_tests()
    try:
        get_analysis("scitx")  # the registry loads its plugins
        problems = plugins.plugin_problems()
        assert [p.name for p in problems] == ["scitx"] and "already registered" in problems[0].error
        assert get_analysis("scitx").version != "9"  # the built-in one is untouched
    finally:
        plugins._reset_for_tests()
        sys.modules.pop("evil_plugin", None)


def test_cli_models_list_shows_the_plugin_family_and_warns_about_broken_plugins(plugin, capsys):
    from nemo_desktop.cli.main import main

    assert main(["models", "list", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert {"kind": "classifier", "family": FAMILY, "plugin": DIST} in data["families"]
    assert {e["name"] for e in data["plugin_errors"]} == {"broken-family", "broken-analysis"}
    assert "skipped plugin 'broken-family' (from nemo-tiny-plugin)" in captured.err
    assert main(["models", "list", "--kind", "classifier"]) == 0
    assert f"{FAMILY} (plugin {DIST})" in capsys.readouterr().out


def test_cli_explain_help_and_run_with_the_plugin_method(plugin, tmp_path, capsys):
    from nemo_desktop.cli.main import main

    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    assert METHOD in out and "--wait-s" in out and "--shout" in out
    img = tmp_path / "green.png"
    Image.new("RGB", (8, 8), (10, 240, 10)).save(img)
    code = main(["explain", str(img), "-y", "red", "-c", f"{FAMILY}:plain", "--method", METHOD, "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["explanation"] == "The image is mostly green, not red."


def test_the_app_lists_the_plugin_analyses(plugin):
    """The Analyses pane lists 'tiny-brightness'; the workbench's method list has 'tiny-caption'."""
    from nemo_desktop.core.app.jobs.analyses import list_page_analyses
    from nemo_desktop.gui.panes.workbench.plugin import _methods_job

    assert "tiny-brightness" in [s.name for s in list_page_analyses()]

    class _Session:
        def settings(self):
            from nemo_desktop.core.store.settings import Settings

            return Settings()

    assert METHOD in [s.name for s in _methods_job(_Session(), None)[0]]


def test_a_worker_process_finds_the_plugins_by_itself(plugin):
    """What a Ray worker does: a fresh interpreter that only reads the registries (no set-up hook)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")])}
    code = ("from nemo_desktop.core.models.families import list_families\n"
            "from nemo_desktop.core.registry import list_analyses\n"
            f"print(('classifier', '{FAMILY}') in list_families(), '{METHOD}' in list_analyses())\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stderr
    assert "Skipped plugin 'broken-family'" in out.stderr


def test_doctor_lists_the_plugins(plugin, capsys):
    from nemo_desktop.cli.main import main

    main(["doctor"])
    out = capsys.readouterr().out
    assert "plugin tiny-colour from nemo-tiny-plugin (nemo_desktop.model_families): adds classifier:tiny-colour" in out
    assert "plugin broken-family from nemo-tiny-plugin (nemo_desktop.model_families): SKIPPED: ImportError" in out


def test_a_plugin_installed_by_pip_into_a_temporary_environment(tmp_path):
    """The distribution built and installed by pip (offline, into a --target folder: a temporary environment on
    top of this one), then seen by `nemo models list` and `nemo explain --help` in a fresh process."""
    from fixtures_tiny.plugin_dist import write_plugin_project

    pytest.importorskip("setuptools")  # the test extra installs it (a Python 3.12+ venv has none)
    project = write_plugin_project(tmp_path / "src")
    target = tmp_path / "env"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(target), str(project)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    assert list(target.glob("nemo_tiny_plugin-0.1.dist-info/entry_points.txt"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]),
           "NEMO_HOME": str(tmp_path / "home")}
    listed = subprocess.run([sys.executable, "-m", "nemo_desktop.cli", "models", "list", "--json"], env=env,
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert {"kind": "classifier", "family": FAMILY, "plugin": DIST} in json.loads(listed.stdout)["families"]
    helped = subprocess.run([sys.executable, "-m", "nemo_desktop.cli", "explain", "--help"], env=env,
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert METHOD in helped.stdout and "--wait-s" in helped.stdout



def _dist(root, name: str, module_text: str, entry: str):
    """A one-module distribution `name` whose nemo_desktop.analyses entry point is `entry` ("NAME = target")."""
    pkg = name.replace("-", "_")
    (root / f"{pkg}.py").write_text(module_text)
    info = root / f"{pkg}-1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n")
    (info / "entry_points.txt").write_text(f"[nemo_desktop.analyses]\n{entry}\n")
    return pkg


def test_the_builtin_analyses_are_the_packages_own_entry_points():
    """One registration shape: NEMO Desktop's analyses are entry points of its own distribution (pyproject.toml),
    the fallback list for a checkout without metadata says the same, each names registry entries, and none is
    listed as a plugin."""
    import tomllib
    from pathlib import Path

    from nemo_desktop.core.base.plugins import ANALYSES_GROUP, list_plugins, plugin_of
    from nemo_desktop.core.registry import AnalysisSpec, list_analyses
    from nemo_desktop.core.registry.registry import BUILTIN_ENTRY_POINTS
    from importlib.metadata import EntryPoint

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert project["entry-points"][ANALYSES_GROUP] == BUILTIN_ENTRY_POINTS
    names = set()
    for name, value in BUILTIN_ENTRY_POINTS.items():
        obj = EntryPoint(name, value, ANALYSES_GROUP).load()
        specs = list(obj) if isinstance(obj, tuple) else [obj]
        assert specs and all(isinstance(s, AnalysisSpec) for s in specs), value
        names |= {s.name for s in specs}
    assert names == set(list_analyses())
    assert not {n for p in list_plugins() for n in p.registered} & names
    assert plugin_of(ANALYSES_GROUP, "scitx") is None


def test_the_older_function_shape_still_loads_with_a_deprecation_note(tmp_path, monkeypatch, caplog):
    from nemo_desktop.core.base import plugins
    from nemo_desktop.core.registry import get_analysis

    root = tmp_path / "site"
    root.mkdir()
    _dist(root, "old-plugin", "from nemo_desktop.core.registry import AnalysisSpec, Inputs\n"
                              "def specs():\n"
                              "    return [AnalysisSpec('old-shape', 'dataset', '1', dict, None,\n"
                              "                         inputs=Inputs(classifier='none', data='none'),\n"
                              "                         description='An older plugin.')]\n",
          "old-shape = old_plugin:specs")
    monkeypatch.syspath_prepend(str(root))
    plugins._reset_for_tests()
    try:
        assert get_analysis("old-shape").description == "An older plugin."
        (plugin,) = plugins.list_plugins()
        assert plugin.ok and plugin.note == plugins.DEPRECATED_FUNCTION and plugin.to_dict()["note"]
        assert "deprecated" in caplog.text
    finally:
        plugins._reset_for_tests()
        sys.modules.pop("old_plugin", None)


def test_a_module_that_registers_on_import_is_refused_in_words(tmp_path, monkeypatch):
    """The undocumented fourth shape (a module whose import registered its analyses) is gone: reported by name."""
    from nemo_desktop.core.base import plugins
    from nemo_desktop.core.registry import list_analyses

    root = tmp_path / "site"
    root.mkdir()
    _dist(root, "module-plugin", "from nemo_desktop.core.registry import AnalysisSpec\n", "mod = module_plugin")
    monkeypatch.syspath_prepend(str(root))
    plugins._reset_for_tests()
    try:
        list_analyses()
        (problem,) = plugins.plugin_problems()
        assert problem.name == "mod" and "names an AnalysisSpec or a tuple of them, not module" in problem.error
    finally:
        plugins._reset_for_tests()
        sys.modules.pop("module_plugin", None)
