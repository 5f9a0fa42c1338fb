"""Files a skeptical user mixes into real work: a FIFO, a dangling symlink, a folder named like an image and a
file without read permission; plus a way to run code as an unprivileged user, because root reads any file
whatever its permission bits say (these tests run as root in CI)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def make_dangling_link(path: Path) -> Path:
    path.symlink_to(path.with_name("moved-away-" + path.name))
    return path


def make_folder_named_like_image(path: Path) -> Path:
    path.mkdir()
    return path


def make_unreadable(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0)
    return path


def bad_files(folder: Path, good_png: bytes) -> dict[str, Path]:
    """One of each kind in `folder`; the unreadable one holds a real PNG (it is only its permission)."""
    return {"fifo": make_fifo(folder / "pipe.png"), "dangling": make_dangling_link(folder / "gone.png"),
            "folder": make_folder_named_like_image(folder / "album.jpg"),
            "unreadable": make_unreadable(folder / "secret.png", good_png)}


# Root reads a file whatever its permission bits say, through two capabilities; without them, root obeys
# the bits like anyone else (and still enters its own private folders, such as pytest's tmp_path).
_DROP_READ_OVERRIDE = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                       "--bounding-set=-dac_override,-dac_read_search"]


def run_unprivileged(args: list[str], *, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a command so that file permissions are enforced (as root: without the read-override capabilities)."""
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without util-linux setpriv: permissions cannot be enforced")
        args = _DROP_READ_OVERRIDE + list(args)
    return subprocess.run(args, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)


def python_unprivileged(code: str, **kw):
    """Run Python `code` with permissions enforced; it prints one JSON document, which is returned."""
    proc = run_unprivileged([sys.executable, "-c", code], **kw)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
