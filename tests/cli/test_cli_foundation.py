"""The CLI skeleton: --version, doctor, cache commands, clear errors for a broken store."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nemo_desktop import __version__
from nemo_desktop.cli.main import main


def run_cli(*argv, env=None):
    return subprocess.run([sys.executable, "-m", "nemo_desktop.cli.main", *argv], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=300)


def test_version_in_a_real_process():
    r = run_cli("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"nemo-desktop {__version__}"


def test_doctor_json_has_every_field(monkeypatch):
    secret = "hf_" + "A" * 34
    r = run_cli("doctor", "--json", env={"HF_TOKEN": secret})
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)
    assert facts["python"]["version"].count(".") == 2
    t = facts["torch"]
    assert t["installed"] and t["version"] and "cuda_build" in t and isinstance(t["gpus"], list)
    for key in ("config", "settings_file", "logs", "store", "database", "artifacts", "thumbnails", "weights"):
        assert facts["paths"][key].startswith(os.environ["NEMO_HOME"])
    assert facts["disk"]["store"]["free_bytes"] > 0
    assert facts["huggingface"]["token_configured"] is True
    assert facts["huggingface"]["offline_mode"] is True
    assert facts["packages"]["torch"] and facts["packages"]["transformers"] and facts["packages"]["timm"]
    assert secret not in r.stdout + r.stderr


def test_doctor_human_output(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out and "paths:" in out and "Hugging Face: token" in out
    assert "memory profile: '" in out and "choose it with --profile" in out  # issue 40


def test_cache_commands_round_trip(capsys):
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    store = ResultsStore.open(get_paths().ensure())
    store.put("k1", "caption", {"text": "a dog"}, {"img": b"123"})
    store.close()
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert json.dumps(info).count("caption") >= 1
    assert main(["cache", "check"]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["cache", "clear", "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": 1, "kind": None}


def test_cache_check_reports_a_missing_artifact(capsys):
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    store = ResultsStore.open(get_paths().ensure())
    res = store.put("k1", "caption", {"text": "a dog"}, {"img": b"123"})
    store.close()
    res.artifacts["img"].unlink()
    assert main(["cache", "check"]) == 1
    assert "problem" in capsys.readouterr().out


def test_unwritable_home_gives_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    code = main(["--home", str(blocker / "sub"), "cache", "info"])
    err = capsys.readouterr().err
    assert code == 3  # runtime error: the data folder cannot be written
    assert "cannot write" in err and "NEMO_HOME" in err


def test_newer_schema_gives_a_clear_error(capsys):
    import sqlite3

    from nemo_desktop.core.store.paths import get_paths

    paths = get_paths().ensure()
    con = sqlite3.connect(paths.database)
    con.execute("PRAGMA user_version = 999")
    con.close()
    code = main(["cache", "info"])
    err = capsys.readouterr().err
    assert code == 3  # runtime error: a store from a newer version
    assert "newer" in err.lower()


def test_corrupt_database_is_moved_aside(capsys):
    from nemo_desktop.core.store.paths import get_paths

    paths = get_paths().ensure()
    paths.database.write_bytes(os.urandom(4096))
    assert main(["cache", "info"]) == 0
    err = capsys.readouterr().err
    assert "moved aside" in err
    moved = [p for p in paths.store_dir.iterdir() if ".corrupt-" in p.name]
    assert len(moved) == 1


@pytest.mark.parametrize("argv", [["cache"], ["nonexistent-command"]])
def test_bad_usage_exits_nonzero(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code != 0


def test_building_the_parser_imports_no_analysis_module():
    # The explain/global options are derived from the analyses' configs only when that command is used, so
    # every other `nemo` command starts without importing them.
    import subprocess
    import sys

    code = ("import sys; from nemo_desktop.cli.main import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.startswith(('nemo_desktop.core.methods', "
            "'nemo_desktop.core.analyses'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_explain_help_lists_the_derived_options(capsys):
    from nemo_desktop.cli.main import main

    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--thumbnail-side" in out and "--contrast" in out and "one of similarity, tops, pdiff, fpdiff" in out
