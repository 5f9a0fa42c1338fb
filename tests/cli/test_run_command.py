"""`nemo run ANALYSIS`: one command per registry entry, its options derived from the entry, for the built-in
analyses and for a plugin's (a throw-away analysis registered through the entry point, tests/fixtures_tiny/
throwaway_plugin.py): found in `nemo run --help`, the completion script, MCP's tools, the Python API and the app's
Analyses list; run with --json / -o, its settings' bounds said in words, Ctrl-C cancels with exit 130."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fixtures_tiny.throwaway_plugin import ANALYSIS, DIST, installed, write_class_folders
from nemo_desktop.cli.main import main


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_HOME", str(tmp_path / "home"))
    yield from installed(tmp_path, monkeypatch)


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    assert done.value.code == 0
    return capsys.readouterr().out


def test_run_help_lists_every_registered_analysis(capsys):
    from nemo_desktop.core.registry import list_analyses

    out = _help(capsys, "run", "--help")
    for name in list_analyses():
        assert f"    {name}" in out, name


def test_an_analysis_help_has_its_data_components_and_every_setting(capsys):
    from nemo_desktop.core.registry import config_params, get_analysis

    out = _help(capsys, "run", "failure-modes", "--help")
    assert "INDEX_OR_DATASET" in out and "--classifier" in out and "--embedder" in out and "--json" in out
    for p in config_params(get_analysis("failure-modes").config):
        assert p.cli_flag in out, p.name
    assert "some of tops, pdiff, setdiff, fpdiff" in " ".join(out.split())  # choices from the field info
    out = _help(capsys, "run", "scitx", "--help")
    assert "--true-label" in out and "--reference" in out and "--editor" in out


def test_a_plugin_analysis_appears_in_every_surface(throwaway):
    """The issue's check: the throw-away analysis is in `nemo run --help`, its own --help with every setting, the
    completion scripts, MCP's tool list, the Python API and the app's Analyses list (the list's Qt-free model; the
    window itself: tests/gui/test_plugin_analysis_in_app.py)."""
    from nemo_desktop.core.base.plugins import list_plugins
    from nemo_desktop.testing import surfaces

    found = surfaces(ANALYSIS)
    assert found == {"registry": True, "nemo run --help": True, "nemo run NAME --help": True, "completion": True,
                     "mcp": True, "api": True, "app": True}
    assert [(p.name, p.dist, p.registered) for p in list_plugins()] == [(ANALYSIS, DIST, (ANALYSIS,))]


def test_a_plugin_analysis_runs_with_json_and_an_output_file(throwaway, tmp_path, capsys):
    data = write_class_folders(tmp_path / "data", {"cat": 3, "dog": 1, "owl": 2})
    out_file = tmp_path / "result.json"
    assert main(["run", ANALYSIS, str(data), "--min-images", "2", "--json", "-o", str(out_file)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["counts"] == {"cat": 3, "owl": 2} and printed["key"]
    assert json.loads(out_file.read_text()) == printed
    assert main(["run", ANALYSIS, str(data)]) == 0  # the summary: its plain fields and where it is stored
    out = capsys.readouterr().out
    assert out.startswith(f"{ANALYSIS} (dataset analysis, version 1):") and "Stored in the results store" in out


@pytest.mark.parametrize("argv, words", [
    (["--min-images", "5000"], "Minimum images (--min-images) must be at most 1000, not 5000."),
    (["--suffix", ".gif"], "Image suffix must be one of .png, .jpg, not '.gif'."),
    (["--min-images", "many"], "--min-images takes int, not 'many'."),
])
def test_bad_settings_are_usage_errors_in_words(throwaway, tmp_path, capsys, argv, words):
    data = write_class_folders(tmp_path / "data", {"cat": 1})
    try:
        code = main(["run", ANALYSIS, str(data), *argv, "--json"])
    except SystemExit as done:  # argparse's own type errors
        code = done.code
    assert code == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert words in error["message"] and error["exit_code"] == 2


def test_a_missing_folder_is_refused_before_the_run(throwaway, tmp_path, capsys):
    assert main(["run", ANALYSIS, str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_a_missing_required_component_names_its_option(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_HOME", str(tmp_path / "home"))
    with pytest.raises(SystemExit) as done:
        main(["run", "model-diff", "--mllm", "x", "--json"])
    assert done.value.code == 2
    assert "--classifier" in json.loads(capsys.readouterr().out)["error"]["message"]


def test_ctrl_c_cancels_the_run_cleanly(throwaway, tmp_path):
    """In a real process: progress lines on stderr, the first Ctrl-C stops at the next check, exit 130 and the
    one cancelled JSON object every command prints."""
    data = write_class_folders(tmp_path / "data", {f"c{i}": 1 for i in range(20)})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(throwaway), os.environ.get("PYTHONPATH", "")]),
           "NEMO_HOME": str(tmp_path / "home")}
    env.pop("TQDM_DISABLE", None)
    proc = subprocess.Popen([sys.executable, "-m", "nemo_desktop.cli", "run", ANALYSIS, str(data), "--wait-s", "5",
                             "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        deadline = time.monotonic() + 120
        while "Counting" not in line and time.monotonic() < deadline and line:
            line = proc.stderr.readline()
        assert "Counting" in line  # progress on stderr, stdout kept for the JSON
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    error = json.loads(out)["error"]
    assert error["type"] == "JobCancelled" and error["exit_code"] == 130
    assert "run the same command to resume" in error["message"]


def test_a_plugin_explanation_method_runs_on_an_image_with_its_true_label(tmp_path, monkeypatch, capsys):
    """A per-sample method takes IMAGE and --true-label; its component (a plugin's model family) by reference."""
    from PIL import Image

    from fixtures_tiny.plugin_dist import FAMILY, METHOD, write_plugin_dist
    from nemo_desktop.core.base import plugins

    monkeypatch.syspath_prepend(str(write_plugin_dist(tmp_path / "site")))
    plugins._reset_for_tests()
    try:
        img = tmp_path / "green.png"
        Image.new("RGB", (8, 8), (10, 240, 10)).save(img)
        assert main(["run", METHOD, str(img), "-y", "red", "-c", f"{FAMILY}:plain", "--shout", "true",
                     "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert printed["explanation"] == "THE IMAGE IS MOSTLY GREEN, NOT RED."
        assert printed["outcome"]["status"] == "explained"  # as `nemo explain --json`, and its exit codes
        with pytest.raises(SystemExit) as done:
            main(["run", METHOD, str(img), "-c", f"{FAMILY}:plain"])  # no true label
        assert done.value.code == 2 and "--true-label" in capsys.readouterr().err
    finally:
        plugins._reset_for_tests()
        for mod in [m for m in sys.modules if m.startswith("nemo_tiny_plugin")]:
            del sys.modules[mod]
