"""The output contract of every `nemo` command (issue 31), walked over every leaf command of the parser, so a new
command is covered without touching this file:

- an option naming a file or folder the command writes is checked when the command line is parsed, before any
  work: a missing folder is a usage error (exit 2; JSON under --json), and `-` is standard output where the
  output can go there and refused with a message everywhere else, never a file named `-`;
- a write that fails later is exit 3 with one line (JSON under --json), never a traceback;
- Ctrl-C gives one cancelled JSON object, exit 130, for every command;
- a closed stdout ends a command quietly;
- `nemo-desktop` without the GUI extra says which extra to install.
"""
from __future__ import annotations

import argparse
import ast
import errno
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from nemo_desktop.cli import exit_codes
from nemo_desktop.cli.main import build_parser, main
from nemo_desktop.cli.options import derive_all
from nemo_desktop.cli.output import OutputPath, Stdout, emit, use_stdout_outputs, write_file, write_json
from nemo_desktop.core.base.errors import JobCancelled, StoreError

COMMANDS_DIR = Path(__file__).resolve().parents[2] / "nemo_desktop" / "cli" / "commands"
# Options that, by the command line's conventions, name something a command writes.
OUTPUT_FLAGS = {"-o", "--output", "--out", "--save", "--csv", "--report"}
OUTPUT_DESTS = {"output", "out", "save", "csv", "report"}


def _leaves(parser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, (*path, name))


LEAVES = dict(_leaves(derive_all(build_parser())))  # `nemo run NAME` and the derived options too
LEAF_IDS = sorted(" ".join(path) for path in LEAVES)


def _leaf(name: str):
    return LEAVES[tuple(name.split())]


def _output_actions(parser) -> list[argparse.Action]:
    return [a for a in parser._actions if isinstance(a.type, OutputPath)]


def _argv(name: str, replace: dict | None = None) -> list[str]:
    """The leaf's command line with a value for every required argument (`replace`: action -> value)."""
    parser = _leaf(name)
    replace = replace or {}
    positionals, options = [], []
    for a in parser._actions:
        if a in replace:
            value = replace[a]
        elif a.required and not isinstance(a, argparse._SubParsersAction):
            value = a.choices[0] if a.choices else "x"
        else:
            continue
        if a.option_strings:
            options += [a.option_strings[-1], value]
        else:
            positionals.append(value)
    return [*name.split(), *positionals, *options]


def _takes_json(name: str) -> bool:
    return any("--json" in a.option_strings for a in _leaf(name)._actions)


OUTPUT_CASES = [(name, a.dest) for name in LEAF_IDS for a in _output_actions(_leaf(name))]


def _action(name: str, dest: str) -> argparse.Action:
    return next(a for a in _output_actions(_leaf(name)) if a.dest == dest)


def test_the_walk_finds_the_commands_and_their_outputs():
    assert len(LEAVES) > 25 and "competency fit" in LEAF_IDS and "bench run" in LEAF_IDS
    outputs = {f"{name} {dest}" for name, dest in OUTPUT_CASES}
    assert {"explain output", "global output", "bench run output", "compare run output", "compare run csv",
            "competency fit output", "competency fit save", "competency causes out", "failure-modes output",
            "failure-modes report", "failure-sentences output", "report output", "bench table output"} <= outputs


def _derived_switch(action) -> bool:
    from nemo_desktop.cli.options import PREFIX

    return action.dest.startswith(PREFIX) and getattr(action.type, "__name__", "") == "bool"


@pytest.mark.parametrize("name", LEAF_IDS)
def test_every_option_that_names_an_output_is_checked_as_one(name):
    """A new command's -o/--output/--out/--save/--csv/--report is an OutputPath, or this fails (a true|false
    setting derived from an analysis' config, the fix's --save, names no file)."""
    unchecked = [a.option_strings or a.dest for a in _leaf(name)._actions
                 if (set(a.option_strings) & OUTPUT_FLAGS or (a.dest in OUTPUT_DESTS and not a.option_strings))
                 and not isinstance(a.type, OutputPath) and not _derived_switch(a)]
    assert not unchecked, f"nemo {name}: {unchecked} name files it writes; give them type=OutputPath(...)"


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if a command starts any work (logging set-up is the first thing main() does for it)."""
    def started(*_a, **_k):
        raise AssertionError("the command started before its output path was checked")

    monkeypatch.setattr("nemo_desktop.core.app.logging_setup.setup_logging", started)


@pytest.mark.parametrize("name,dest", OUTPUT_CASES)
def test_an_output_into_a_missing_folder_is_refused_before_any_work(name, dest, tmp_path, capsys, no_work):
    action = _action(name, dest)
    target = tmp_path / "nonexistent" / "dir" / ("sub" if action.type.folder else "out.json")
    if action.type.folder:  # a folder is created, but not inside a file
        (tmp_path / "nonexistent").write_text("a file")
    argv = _argv(name, {action: str(target)}) + (["--json"] if _takes_json(name) else [])
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    assert done.value.code == exit_codes.USAGE
    if _takes_json(name):
        error = json.loads(out)["error"]
        assert error["type"] == "UsageError" and error["exit_code"] == 2 and "nonexistent" in error["message"]
        assert "Traceback" not in err
    else:
        assert "nonexistent" in err and "Traceback" not in err


@pytest.mark.parametrize("name,dest", OUTPUT_CASES)
def test_dash_is_stdout_or_refused_never_a_file(name, dest, tmp_path, monkeypatch, capsys, no_work):
    monkeypatch.chdir(tmp_path)
    action = _action(name, dest)
    argv = _argv(name, {action: "-"})
    if action.type.stdout is None:
        with pytest.raises(SystemExit) as done:
            main(argv + (["--json"] if _takes_json(name) else []))
        out, err = capsys.readouterr()
        assert done.value.code == exit_codes.USAGE
        assert "'-' (standard output) is not possible here" in (out + err)
    else:
        args = build_parser().parse_args(argv)
        assert isinstance(getattr(args, dest), Stdout)
        use_stdout_outputs(args)
        assert getattr(args, dest) is None  # stdout: no file
        assert args.json is (action.type.stdout == "json")  # -o - is --json where -o is the JSON
    assert not (tmp_path / "-").exists()


def test_dash_o_prints_the_json_once_on_stdout(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["global", "RUN", "-o", "-"])
    use_stdout_outputs(args)
    emit(args, {"answer": 42}, lambda: "a human summary")
    out = capsys.readouterr().out
    assert json.loads(out) == {"answer": 42} and "summary" not in out and not (tmp_path / "-").exists()


def test_an_output_path_is_checked_for_what_it_is(tmp_path):
    file_type, folder_type = OutputPath(), OutputPath(folder=True)
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(argparse.ArgumentTypeError, match="is a folder"):
        file_type(str(tmp_path))
    with pytest.raises(argparse.ArgumentTypeError, match="is a file, not a folder"):
        folder_type(str(tmp_path / "a_file"))
    assert file_type(str(tmp_path / "new.json")) == str(tmp_path / "new.json")
    assert folder_type(str(tmp_path / "new" / "deeper")) == str(tmp_path / "new" / "deeper")  # made by the command
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            with pytest.raises(argparse.ArgumentTypeError, match="not writable"):
                file_type(str(locked / "out.json"))
        finally:
            locked.chmod(0o700)


# -- a write that fails after the work -------------------------------------------------------------------------
def test_a_write_that_fails_later_is_a_store_error_naming_the_file(tmp_path, monkeypatch):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("nemo_desktop.core.store.atomic.atomic_write_bytes", full)  # under atomic_write_text
    monkeypatch.setattr("nemo_desktop.core.store.atomic_write_bytes", full)
    for write in (lambda: write_json({"a": 1}, tmp_path / "out.json"),
                  lambda: write_file(tmp_path / "out.json", b"report bytes")):
        with pytest.raises(StoreError) as err:
            write()
        assert "Cannot write" in err.value.message and "out.json" in err.value.message
        assert "No space left" in err.value.message


@pytest.mark.parametrize("as_json", [False, True])
def test_a_failed_write_exits_3_without_a_traceback(tmp_path, monkeypatch, capsys, as_json):
    """A command whose folder vanished between the check and the write (the leaf's work replaced by an emit)."""
    target = tmp_path / "gone" / "result.json"
    target.parent.mkdir()

    def work(args):
        target.parent.rmdir()  # the folder is removed while the command works
        emit(args, {"answer": 42}, lambda: "summary")
        return 0

    parser_args = build_parser().parse_args(["global", "RUN", "-o", str(target)] + (["--json"] if as_json else []))
    parser_args.func = work
    monkeypatch.setattr("nemo_desktop.cli.main.build_parser", lambda: _FixedParser(parser_args))
    rc = main(["global", "RUN"])
    out, err = capsys.readouterr()
    assert rc == exit_codes.RUNTIME and "Traceback" not in err
    if as_json:
        error = json.loads(out)["error"]
        assert error["type"] == "StoreError" and error["exit_code"] == 3 and str(target) in error["message"]
    else:
        assert f"error: Cannot write {target}" in err and out == ""


def test_an_unforeseen_os_error_is_one_line_exit_3(monkeypatch, capsys):
    args = build_parser().parse_args(["global", "RUN", "--json"])
    args.func = lambda a: open("/nonexistent-dir/file", "w")  # noqa: SIM115 - the error is the point
    monkeypatch.setattr("nemo_desktop.cli.main.build_parser", lambda: _FixedParser(args))
    assert main(["global", "RUN"]) == exit_codes.RUNTIME
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["exit_code"] == 3 and "/nonexistent-dir/file" in error["message"]


def test_commands_write_their_files_through_the_checked_writer():
    """cli/commands write output files with output.write_file (a failure is exit 3 with the file's name), not
    with the store's atomic writers directly (desktop-entry raises its own StoreError around them)."""
    offenders = []
    for path in sorted(COMMANDS_DIR.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "atomic_write_" in text and path.name != "desktop_entry.py":
            offenders.append(path.name)
    assert not offenders


class _FixedParser:
    """build_parser() stand-in whose parse_args returns prepared args."""

    def __init__(self, args):
        self.args = args

    def parse_args(self, _argv):
        return self.args

    def print_help(self):  # pragma: no cover - not reached
        pass


# -- Ctrl-C ----------------------------------------------------------------------------------------------------
CANCELLED_KEYS = {"type", "message", "hint", "exit_code"}


def _assert_cancelled_json(out: str) -> dict:
    error = json.loads(out)["error"]
    assert set(error) >= CANCELLED_KEYS and error["type"] == "JobCancelled" and error["exit_code"] == 130
    return error


@pytest.mark.parametrize("name", LEAF_IDS)
def test_ctrl_c_under_json_is_one_cancelled_object(name, monkeypatch, capsys):
    """A Ctrl-C that reaches the command line (a second one, or one while a model loads) in every command."""
    if not _takes_json(name):
        pytest.skip("no --json (the completion script generator; the MCP server, whose stdout is the protocol)")
    args = build_parser().parse_args(_argv(name) + ["--json"])

    def interrupted(_args):
        raise KeyboardInterrupt

    args.func = interrupted
    monkeypatch.setattr("nemo_desktop.cli.main.build_parser", lambda: _FixedParser(args))
    assert main(_argv(name)) == exit_codes.INTERRUPTED
    out, err = capsys.readouterr()
    _assert_cancelled_json(out)
    assert "Traceback" not in err and "resumes" in err


def test_every_cancel_handler_reports_through_the_shared_shape():
    """Each `except JobCancelled` / `except KeyboardInterrupt` of cli/commands returns output.cancelled(...) or
    re-raises: a handler that prints its own words leaves stdout empty under --json (compare, competency,
    failure-modes and failure-sentences did) or prints another shape (index did)."""
    bad = []
    for path in sorted(COMMANDS_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ExceptHandler) or node.type is None:
                continue
            names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
            if not names & {"JobCancelled", "KeyboardInterrupt"}:
                continue
            calls = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            raises = any(isinstance(n, ast.Raise) for n in ast.walk(node))
            if "cancelled" not in calls and not raises:
                bad.append(f"{path.name}:{node.lineno}")
    assert not bad, f"cancel handlers that bypass output.cancelled: {bad}"


@contextmanager
def _cancelled_at_once(*_a, **_k):
    raise JobCancelled()
    yield  # pragma: no cover


def _images(tmp_path) -> Path:
    import numpy as np
    from PIL import Image

    root = tmp_path / "images"
    for cls in ("cat", "dog"):
        (root / cls).mkdir(parents=True)
        Image.fromarray(np.full((8, 8, 3), 9, np.uint8)).save(root / cls / "a.png")
    return root


# Commands that handle a cancel themselves, each with the arguments that get it to its work.
def _work_argvs(tmp_path) -> dict[str, list[str]]:
    root = _images(tmp_path)
    image = str(root / "cat" / "a.png")
    return {
        "compare run": ["compare", "run", "--model-a", "a", "--model-b", "b", "--llm", "l"],
        "compare score": ["compare", "score", "--model-a", "a", "--model-b", "b", "--judge", "j",
                          "--explanation", "A is better."],
        "compare demo": ["compare", "demo", "--llm", "l"],
        "competency fit": ["competency", "fit", str(root), "-c", "x"],
        "competency score": ["competency", "score", image, "-c", "x", "-E", "k"],
        "competency explain": ["competency", "explain", image, "-c", "x", "-E", "k"],
        "competency bench": ["competency", "bench", str(root), "-c", "x", "-E", "k"],
        "competency causes": ["competency", "causes", str(root), "-c", "x", "-E", "k", "-o", str(tmp_path / "o")],
        "failure-modes": ["failure-modes", "SOME_INDEX"],
        "failure-sentences": ["failure-sentences", str(tmp_path / "s.json"), "--mllm", "m"],
        "explain": ["explain", image, "-y", "cat", "-c", "x", "-l", "m", "-r", "none"],
        "global": ["global", "RUN"],
        "index": ["index", str(root), "--classifier", "timm:local-dir:/nowhere"],
        "predict": ["predict", image, "-c", "x"],
        "demo": ["demo"],
        "cache check": ["cache", "check"],
    }


@pytest.mark.parametrize("name", ["compare run", "compare score", "compare demo", "competency fit",
                                  "competency score", "competency explain", "competency bench",
                                  "competency causes", "failure-modes", "failure-sentences", "explain", "global",
                                  "index", "predict", "demo", "cache check"])
def test_a_cancelled_job_prints_the_cancelled_object_under_json(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("nemo_desktop.cli.progress.cancellable_job", _cancelled_at_once)
    assert main(_work_argvs(tmp_path)[name] + ["--json"]) == exit_codes.INTERRUPTED
    out, err = capsys.readouterr()
    error = _assert_cancelled_json(out)
    assert error["message"] and error["message"] in err and "Traceback" not in err


def test_ctrl_c_while_index_loads_its_model_is_a_cancel(tmp_path, monkeypatch, capsys):
    root = _images(tmp_path)

    def loading(*_a, **_k):
        raise KeyboardInterrupt  # Ctrl-C twice while the weights load

    monkeypatch.setattr("nemo_desktop.core.models.families.load_model", loading)
    assert main(["index", str(root), "--classifier", "timm:local-dir:/nowhere", "--json"]) == 130
    _assert_cancelled_json(capsys.readouterr().out)


# -- a closed stdout -------------------------------------------------------------------------------------------
class _ClosedPipe:
    def write(self, _text):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    def fileno(self):
        raise ValueError("no descriptor")


@pytest.mark.parametrize("argv", [["completion", "bash"], ["models", "list", "--json"], ["doctor", "--json"],
                                  ["cache", "info", "--json"], ["index", "--list", "--json"]])
def test_a_closed_stdout_ends_a_command_quietly(argv, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(argv) == exit_codes.BROKEN_PIPE
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv", [["completion", "bash"], ["models", "list", "--json"]])
def test_a_closed_pipe_prints_no_traceback(argv):
    """`nemo completion bash | head -c 10`: the reader is gone before the command writes."""
    proc = subprocess.Popen([sys.executable, "-m", "nemo_desktop.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    proc.stdout.close()  # like `head` exiting
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == exit_codes.BROKEN_PIPE
    assert "Traceback" not in err and "BrokenPipe" not in err and err == ""


# -- the desktop app without its extra ---------------------------------------------------------------------------
BLOCK_PYSIDE6 = "import sys; sys.modules['PySide6'] = None; "


@pytest.mark.parametrize("start", [
    "from nemo_desktop.gui.app import main; sys.exit(main([]))",  # the nemo-desktop console script
    "import runpy; sys.argv = ['nemo_desktop']; runpy.run_module('nemo_desktop', run_name='__main__')",
])
def test_the_desktop_app_without_pyside6_names_the_extra(start, tmp_path):
    proc = subprocess.run([sys.executable, "-c", BLOCK_PYSIDE6 + start], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "QT_QPA_PLATFORM": "offscreen",
                                            "NEMO_HOME": str(tmp_path / "home")})
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr  # one line
    assert "nemo-desktop[gui]" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "home").exists()  # refused before anything was set up


def test_the_desktop_app_version_needs_no_pyside6():
    proc = subprocess.run([sys.executable, "-c", BLOCK_PYSIDE6 + "from nemo_desktop.gui.app import main; "
                           "sys.exit(main(['--version']))"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("nemo-desktop ")


# -- the data root -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", [["--portable"], ["--portable-dir", "PORTABLE"]])
def test_portable_mode_with_nemo_home_is_refused(flag, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NEMO_HOME", str(tmp_path / "home"))
    argv = [f.replace("PORTABLE", str(tmp_path / "p")) for f in flag]
    assert main([*argv, "doctor", "--json"]) == exit_codes.USAGE
    error = json.loads(capsys.readouterr().out)["error"]
    assert "NEMO_HOME" in error["message"] and flag[0] in error["message"] and "unset NEMO_HOME" in error["hint"]
    monkeypatch.delenv("NEMO_HOME")
    assert main(["--home", str(tmp_path / "h"), *argv, "doctor"]) == exit_codes.USAGE
    assert "--home" in capsys.readouterr().err


def test_doctor_says_which_setting_names_the_data_root(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NEMO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NEMO_PORTABLE", str(tmp_path / "p"))
    assert main(["doctor", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert "NEMO_HOME" in facts["path_note"] and "wins" in facts["path_note"]
    assert facts["paths"]["store"].startswith(str(tmp_path / "home")) and facts["paths"]["portable"] is False
    assert main(["doctor"]) == 0
    assert "note: NEMO_HOME" in capsys.readouterr().out
    monkeypatch.delenv("NEMO_PORTABLE")
    assert main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path_note"] is None
