"""Conventions every command shares: entry points, exit codes (documented in --help), --json on stdout (errors
too), shell completion generated from the parser, and progress for predict."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from nemo_desktop import __version__
from nemo_desktop.cli import exit_codes
from nemo_desktop.cli.output import exit_code_for
from nemo_desktop.cli.main import main
from nemo_desktop.core.base.errors import (ConfigError, InputImageError, JobCancelled, ModelError, StoreError,
                                           WeightsNotFoundError)


def _run(*argv):
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})


def test_python_m_entry_points():
    cli = _run("-m", "nemo_desktop.cli", "--version")
    assert cli.returncode == 0 and cli.stdout.strip() == f"nemo-desktop {__version__}"
    gui = _run("-m", "nemo_desktop", "--version")  # the desktop app's parser answers before Qt starts
    assert gui.returncode == 0 and gui.stdout.strip() == f"nemo-desktop {__version__}"


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("0 success", "1 partial", "2 usage error", "3 runtime error", "130 interrupted"):
        assert phrase in text


def test_error_kinds_map_to_exit_codes():
    assert exit_code_for(ConfigError("x")) == exit_codes.USAGE == 2
    assert exit_code_for(InputImageError("x")) == exit_codes.USAGE
    assert exit_code_for(WeightsNotFoundError("x")) == exit_codes.RUNTIME == 3
    assert exit_code_for(ModelError("x")) == exit_codes.RUNTIME
    assert exit_code_for(StoreError("x")) == exit_codes.RUNTIME
    assert exit_code_for(JobCancelled("x")) == exit_codes.INTERRUPTED == 130


def test_predict_with_no_readable_image_completed_nothing_reported_once(tmp_path, capsys):
    rc = main(["predict", str(tmp_path / "nope.png"), "-c", "timm:local-dir:/nowhere"])
    err = capsys.readouterr().err
    assert rc == 3  # a batch command none of whose items completed (README: predict, index, bench run)
    assert err.count("error:") == 1 and err.count("nope.png") == 1, err


def test_several_unreadable_images_are_each_reported_once(tmp_path, capsys):
    bad = [tmp_path / "a.jpg", tmp_path / "b.jpg"]
    for p in bad:
        p.write_text("not an image")
    rc = main(["predict", *map(str, bad), "-c", "timm:local-dir:/nowhere"])
    err = capsys.readouterr().err
    assert rc == 3 and err.count("a.jpg") == 1 and err.count("b.jpg") == 1
    assert "None of the 2 images could be read" in err


def test_errors_under_json_are_json_on_stdout(tmp_path, capsys):
    rc = main(["predict", str(tmp_path / "nope.png"), "--json"])
    out, err = capsys.readouterr()
    payload = json.loads(out)["error"]
    assert rc == 3 and payload["exit_code"] == 3 and payload["type"] == "InputImageError"
    assert "nope.png" in payload["message"] and "error:" not in err



def _leaf_commands(parser, path=()):
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaf_commands(sub, (*path, name))


def test_every_command_with_output_takes_json():
    """--json is the one spelling of machine output (a file is -o FILE), on every command but the completion
    script generator, whose output is the script, and the MCP server, whose stdout is the protocol."""
    from nemo_desktop.cli.main import build_parser
    from nemo_desktop.cli.options import derive_all

    leaves = dict(_leaf_commands(derive_all(build_parser())))
    assert len(leaves) > 15
    without = sorted(" ".join(path) for path, p in leaves.items()
                     if "--json" not in {o for a in p._actions for o in a.option_strings})
    assert without == ["completion", "mcp"]
    for path, p in leaves.items():
        for action in p._actions:
            if "--json" in action.option_strings:
                assert action.nargs == 0, f"nemo {' '.join(path)}: --json takes no file (that is -o FILE)"


def test_cache_commands_keep_stdout_machine_readable(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert main(["cache", "discard", str(tmp_path / "x.corrupt-1"), "--json"]) == 2  # nobody to ask: usage error
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["exit_code"] == 2 and "--yes" in error["hint"]
    assert main(["cache", "check", "--repair", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_usage_errors_from_argparse_are_json_under_json(capsys):
    with pytest.raises(SystemExit) as done:
        main(["predict", "--json"])  # IMAGE is required
    out = capsys.readouterr().out
    assert done.value.code == 2
    error = json.loads(out)["error"]
    assert error["type"] == "UsageError" and error["exit_code"] == 2 and "IMAGE" in error["message"]


def test_runtime_errors_under_json(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    rc = main(["--home", str(blocker / "sub"), "cache", "info", "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert rc == 3 and error["type"] == "StoreError" and "cannot write" in error["message"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_completes_commands_options_and_choices(tmp_path, capsys):
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "nemo.bash"
    script.write_text(capsys.readouterr().out)

    def complete(*words):
        line = " ".join(("nemo",) + words)
        code = (f'source {script}; COMP_WORDS=(nemo {" ".join(repr(w) for w in words)}); '
                f'COMP_CWORD={len(words)}; COMP_LINE="{line}"; COMP_POINT={len(line)}; _shtab_nemo; '
                'printf "%s\\n" "${COMPREPLY[@]}"')
        return subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=60).stdout.split()

    assert complete("pre") == ["predict"]
    # the options derived from the analyses' configs, and `nemo run`'s one sub-command per registered analysis
    assert complete("fix", "--mo") == ["--mode"]
    assert "--k-scope" in complete("explain", "--k-")
    assert complete("run", "failure-m") == ["failure-modes"]
    assert "--clusters" in complete("run", "failure-modes", "--clu")
    assert set(complete("")) >= {"predict", "explain", "doctor", "report", "bench", "completion", "models"}
    assert "--top-k" in complete("predict", "--to")
    assert complete("completion", "") == ["bash", "zsh", "fish"]
    assert set(complete("bench", "")) >= {"run", "merge", "table"}


def _every_command():
    """(path, parser) of every command and sub-command, each with its derived options added (the analyses'
    settings, `nemo run`'s one sub-command per registered analysis)."""
    import argparse

    from nemo_desktop.cli.main import build_parser
    from nemo_desktop.cli.options import derive_all

    def walk(parser, path=()):
        yield path, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, (*path, name))

    return list(walk(derive_all(build_parser())))


def test_completion_offers_every_option_of_every_command(tmp_path, capsys):
    """For every command, every option its --help lists is in the completion script: in bash per command (the
    script's option list of that command), in zsh and fish by name. The options derived from an analysis' config
    were missing before (`nemo fix --mo<TAB>` completed nothing)."""
    import re

    scripts = {}
    for shell in ("bash", "zsh", "fish"):
        assert main(["completion", shell]) == 0
        scripts[shell] = capsys.readouterr().out
    commands = _every_command()
    assert len(commands) > 40 and ("run", "failure-modes") in dict(commands)
    for path, parser in commands:
        listed = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", parser.format_help()))
        flags = {o for a in parser._actions for o in a.option_strings}
        assert flags <= listed | {"-h"}, path  # what --help shows is what the parser takes
        var = "_shtab_nemo_" + "_".join(re.sub(r"\W", "_", p) for p in path) + ("_" if path else "") + \
            "option_strings=("
        line = next(ln for ln in scripts["bash"].splitlines() if ln.startswith(var))
        bash_flags = set(line[len(var):].rstrip(")").split())
        assert flags <= bash_flags, (path, sorted(flags - bash_flags))
        for flag in flags:
            long_or_short = f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", scripts["zsh"]), (path, flag)
            assert long_or_short in scripts["fish"], (path, flag)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_cover_every_command(shell, capsys):
    from nemo_desktop.cli.main import build_parser

    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert all(name in script for name in commands)
    assert "--top-k" in script and "--portable-dir" in script


def test_predict_reports_progress(tmp_path, monkeypatch, capsys):
    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
    from nemo_desktop.cli.progress import StageBars

    model = build_tiny_timm(tmp_path / "model", label_names=TINY_CLASSES)
    images = []
    for i in range(3):
        images.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(np.full((32, 32, 3), 40 * i, np.uint8)).save(images[-1])
    seen = []
    monkeypatch.setattr(StageBars, "__call__", lambda self, p: seen.append((p.stage, p.done, p.total)))
    assert main(["predict", *images, "-c", f"timm:local-dir:{model}", "--batch-size", "2", "--device", "cpu",
                 "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["results"]) == 3
    assert ("Reading images", 3, 3) in seen
    assert [s for s in seen if s[0] == "Classifying"] == [("Classifying", 0, 3), ("Classifying", 2, 3),
                                                          ("Classifying", 3, 3)]


def test_doctor_checks_shipped_files(tmp_path, monkeypatch, capsys):
    from nemo_desktop.core.base.resources import resources_root

    assert main(["doctor", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    names = {row["resource"] for row in facts["files"]}
    assert facts["files_ok"] and {"catalog.json", "prompts/scitx_hypothesis.v1.txt", "font DejaVuSans.ttf",
                                  "prompt scitx_hypothesis"} <= names

    copy = tmp_path / "res"
    shutil.copytree(resources_root(), copy)
    (copy / "vocab" / "imagenet1k_classes.tsv").unlink()
    monkeypatch.setenv("NEMO_RESOURCES", str(copy))
    assert main(["doctor"]) == 3  # a broken installation is not "all is well"
    out = capsys.readouterr().out
    assert "PROBLEM" in out and "vocab/imagenet1k_classes.tsv" in out
