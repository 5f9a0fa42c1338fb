"""Issue 42 §4: the install route of scripts/_env.sh (scripts/install_plan.py). The CPU-only route takes torch and
torchvision, as a pair with pyproject's ranges, from PyTorch's CPU wheel index on request (NEMO_TORCH=cpu) or
when no NVIDIA driver is present and the index answers, else the default with a note; the checkout is installed
editable in setuptools' compat mode (a path entry type checkers resolve). The real CPU index cannot be reached
from the test machines (only the default index is): a loopback server stands in for it."""
from __future__ import annotations

import http.server
import importlib.util
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install_plan.py"


def _module():
    spec = importlib.util.spec_from_file_location("install_plan", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


IP = _module()
EDITABLE = ["install", "-q", "-e", ".[gui,test]", "--config-settings", "editable_mode=compat"]
TORCH = ["install", "-q", "torch>=2.6", "torchvision>=0.21", "--index-url", IP.CPU_INDEX]


def _plan(env, driver, answers):
    return IP.plan("gui,test", env, has_driver=lambda: driver, answers=lambda url: answers)


@pytest.mark.parametrize("env, driver, answers, commands, note", [
    ({"NEMO_TORCH": "cpu"}, True, True, [TORCH, EDITABLE], "NEMO_TORCH=cpu"),  # on request, even with a GPU
    ({}, False, True, [TORCH, EDITABLE], "no NVIDIA driver"),  # automatically without a driver
    ({"NEMO_TORCH": "auto"}, True, True, [EDITABLE], None),  # a driver: the default (CUDA) build
    ({}, False, False, [EDITABLE], "did not answer"),  # the index does not answer: the default, with a note
    ({"NEMO_TORCH": "cpu"}, False, False, [EDITABLE], "did not answer"),
    ({"NEMO_TORCH": "default"}, False, True, [EDITABLE], None),
    ({"NEMO_TORCH": "rocm"}, False, True, [EDITABLE], "is not one of"),
])
def test_the_torch_route(env, driver, answers, commands, note):
    got, notes = _plan(env, driver, answers)
    assert got == commands
    assert (note is None and notes == []) or (note and note in notes[0]), notes


def test_the_torch_pair_follows_pyproject():
    assert IP.torch_requirements(ROOT / "pyproject.toml") == ["torch>=2.6", "torchvision>=0.21"]


class _Index(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/whl/cpu/torch/" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def _run(env):
    return subprocess.run([sys.executable, str(SCRIPT), "--extras", "gui"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **env}, timeout=60)


def test_the_command_lines_it_prints_for_scripts_env_sh():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/whl/cpu"
    try:
        out = _run({"NEMO_TORCH": "cpu", "NEMO_TORCH_INDEX": url})
    finally:
        server.shutdown()
        server.server_close()
    lines = [line.split("\t") for line in out.stdout.splitlines()]
    assert lines == [["install", "-q", "torch>=2.6", "torchvision>=0.21", "--index-url", url],
                     ["install", "-q", "-e", ".[gui]", "--config-settings", "editable_mode=compat"]]
    assert "CPU wheels" in out.stderr
    closed = _run({"NEMO_TORCH": "cpu", "NEMO_TORCH_INDEX": url})  # the server is gone: the default, with a note
    assert [line.split("\t")[2] for line in closed.stdout.splitlines()] == ["-e"]
    assert "did not answer" in closed.stderr


def test_env_sh_installs_what_the_plan_says():
    text = (ROOT / "scripts" / "_env.sh").read_text()
    assert "scripts/install_plan.py" in text and 'pip "${command[@]}"' in text
    assert "editable=compat" in text and "NEMO_TORCH" in text
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "_env.sh")], check=True)
