"""The pytest plugin `nemo_desktop.testing` as a plugin author runs it: a fresh pytest process with
`-p nemo_desktop.testing`, a test file of their own that subclasses AnalysisContract for their entry (the throw-away
analysis of tests/fixtures_tiny/throwaway_plugin.py, registered through its entry point), and a second class whose
analysis leaves a setting out of its store key, which the plugin must catch."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fixtures_tiny.throwaway_plugin import write_throwaway_dist

ROOT = Path(__file__).resolve().parents[2]

AUTHOR_TESTS = '''
import pytest

from nemo_desktop.core.registry import Components
from nemo_desktop.testing import AnalysisCase, AnalysisContract


def _case(nemo_store, tmp_path):
    import nemo_throwaway
    from PIL import Image

    for name, n in (("cat", 3), ("dog", 1), ("owl", 2)):
        (tmp_path / "data" / name).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (4, 4), (i, 0, 0)).save(tmp_path / "data" / name / f"{i}.png")
    return AnalysisCase(Components(store=nemo_store), (tmp_path / "data",), {},
                        {"min_images": 2, "suffix": ".jpg", "wait_s": 0.01}, calls=lambda: len(nemo_throwaway.CALLS))


class TestTinyCount(AnalysisContract):
    name = "tiny-count"

    def case(self, nemo_store, tmp_path):
        return _case(nemo_store, tmp_path)


class TestTinyCountWithAKeyThatForgetsASetting(AnalysisContract):
    name = "tiny-count"

    def case(self, nemo_store, tmp_path, monkeypatch):
        import nemo_desktop.core.store as store

        real = store.result_key
        monkeypatch.setattr(store, "result_key", lambda kind, **parts: real(kind, files=parts["files"]))
        return _case(nemo_store, tmp_path)
'''


def test_a_plugin_author_runs_the_contract_on_their_entry(tmp_path):
    site = write_throwaway_dist(tmp_path / "site")
    tests = tmp_path / "author"
    tests.mkdir()
    (tests / "test_tiny_count.py").write_text(AUTHOR_TESTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "QT_QPA_PLATFORM": "offscreen", "NEMO_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "nemo_desktop.testing", "-rA", "-q",
                          "-p", "no:cacheprovider", "test_tiny_count.py"], cwd=tests, env=env, capture_output=True,
                         text=True, timeout=600)
    outcomes = {line.split(" ", 1)[1].split("::", 1)[1].split(" ")[0]: line.split(" ", 1)[0]
                for line in run.stdout.splitlines() if line.startswith(("PASSED ", "FAILED ", "SKIPPED ", "ERROR "))
                and "::" in line}
    good = {k.split("::")[1]: v for k, v in outcomes.items() if k.startswith("TestTinyCount::")}
    assert good == {"test_entry_and_field_info": "PASSED", "test_config_round_trips": "PASSED",
                    "test_result_round_trips_and_a_rerun_is_served_from_the_store": "PASSED",
                    "test_the_key_changes_with_every_setting": "PASSED", "test_cancel_stops_within_one_unit": "PASSED",
                    "test_appears_in_every_surface": "PASSED"}, run.stdout[-4000:] + run.stderr[-2000:]
    bad = {k.split("::")[1]: v for k, v in outcomes.items() if k.startswith("TestTinyCountWithAKey")}
    assert bad["test_the_key_changes_with_every_setting"] == "FAILED"
    assert "tiny-count: changing min_images did not change the key" in run.stdout
    assert bad["test_config_round_trips"] == "PASSED"
