"""The pip commands scripts/_env.sh runs to install NEMO Desktop into .venv, one command a line (its arguments
separated by tabs), with notes on stderr. Standard library only: it runs before the venv exists.

    python scripts/install_plan.py [--extras gui,test,docs]

1. On the CPU-only route, torch and torchvision first, as a pair, from PyTorch's CPU wheel index
   (https://download.pytorch.org/whl/cpu: without the 5.4 GiB of CUDA libraries), with pyproject.toml's own
   version ranges; the next command then finds them installed.
   The route is taken when NEMO_TORCH=cpu, or when NEMO_TORCH is unset/auto, no NVIDIA driver is present
   (/proc/driver/nvidia/version, nvidia-smi) and the CPU index answers. When the index does not answer, the
   default (PyPI's CUDA build) is installed and a note says so. NEMO_TORCH=default always takes PyPI's build.
   NEMO_TORCH_INDEX overrides the index URL (a mirror).
2. The checkout itself, editable in setuptools' "compat" mode: a .pth path entry, which type checkers (mypy,
   pyright) and IDEs resolve, where the default editable mode's import hook is invisible to them.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CHOICES = ("auto", "cpu", "default")
ROOT = Path(__file__).resolve().parents[1]


def torch_requirements(pyproject: Path) -> list[str]:
    """pyproject.toml's torch and torchvision requirements (e.g. 'torch>=2.6'), in that order."""
    text = pyproject.read_text(encoding="utf-8")
    found = {m.group(1): m.group(0).strip('"') for m in re.finditer(r'"(torch|torchvision)\s*[<>=!~][^"]*"', text)}
    return [found.get(name, name) for name in ("torch", "torchvision")]


def nvidia_driver_present() -> bool:
    return Path("/proc/driver/nvidia/version").is_file() or shutil.which("nvidia-smi") is not None


def index_answers(url: str, timeout: float = 5.0) -> bool:
    """Whether the wheel index lists torch (its simple-API page for torch)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/torch/", timeout=timeout) as reply:
            return 200 <= reply.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def choose_torch(env: dict[str, str], has_driver, answers) -> tuple[str | None, list[str]]:
    """(the CPU index URL to take torch from, or None for the default) and the notes to print."""
    choice = (env.get("NEMO_TORCH") or "auto").strip().lower()
    url = env.get("NEMO_TORCH_INDEX") or CPU_INDEX
    if choice not in CHOICES:
        return None, [f"NEMO_TORCH={choice!r} is not one of {', '.join(CHOICES)}; installing the default torch."]
    if choice == "default":
        return None, []
    if choice == "auto" and has_driver():
        return None, []
    why = "NEMO_TORCH=cpu" if choice == "cpu" else "no NVIDIA driver found"
    if answers(url):
        return url, [f"{why}: torch and torchvision come from PyTorch's CPU wheels ({url}), without CUDA libraries."]
    return None, [f"{why}, but the CPU wheel index {url} did not answer: installing the default torch (with its "
                  "5.4 GiB of CUDA libraries). Set NEMO_TORCH_INDEX to a reachable mirror to retry."]


def plan(extras: str, env: dict[str, str], has_driver=nvidia_driver_present, answers=index_answers,
         pyproject: Path = ROOT / "pyproject.toml") -> tuple[list[list[str]], list[str]]:
    """(pip argument lists, after `python -m pip`; notes)."""
    url, notes = choose_torch(env, has_driver, answers)
    commands = []
    if url:
        commands.append(["install", "-q", *torch_requirements(pyproject), "--index-url", url])
    commands.append(["install", "-q", "-e", f".[{extras}]", "--config-settings", "editable_mode=compat"])
    return commands, notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extras", default="gui,test,docs")
    args = ap.parse_args(argv)
    commands, notes = plan(args.extras, dict(os.environ))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for command in commands:
        print("\t".join(command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
