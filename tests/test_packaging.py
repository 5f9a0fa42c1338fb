"""The wheel is the product: built by the real build backend, it holds every file the program reads at run time
(the shipped resources and the report fonts), and an installed copy finds its catalog outside the checkout."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESOURCES = ROOT / "nemo_desktop" / "resources"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """setuptools' build_wheel without build isolation (no network), on a copy of the tree so the checkout gets
    no build/ or egg-info folders."""
    tmp = tmp_path_factory.mktemp("dist")
    src, out = tmp / "src", tmp / "out"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "models_cache", "build", "*.egg-info",
                                                              "__pycache__", ".pytest_cache", "tests", "docs"))
    code = "import sys; from setuptools import build_meta as b; print(b.build_wheel(sys.argv[1]))"
    r = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return out / r.stdout.split()[-1]


def test_the_wheel_holds_every_shipped_resource_and_the_fonts(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = sorted(p.relative_to(ROOT).as_posix() for p in RESOURCES.rglob("*") if p.is_file())
    assert len(shipped) > 25 and "nemo_desktop/resources/catalog.json" in shipped
    assert [f for f in shipped if f not in names] == []
    assert "nemo_desktop/core/reports/fonts/DejaVuSans.ttf" in names


def test_an_unpacked_wheel_reads_its_catalog_outside_the_checkout(wheel, tmp_path):
    # The wheel's files on sys.path instead of the checkout: what an installed copy sees.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import nemo_desktop; "
            "from nemo_desktop.core.resources import resources_root; "
            "from nemo_desktop.core.models.catalog import list_catalog; "
            "print(nemo_desktop.__file__); print(resources_root()); print(len(list_catalog()))")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("PYTHONPATH", "NEMO_RESOURCES")}
    r = subprocess.run([sys.executable, "-c", code, str(site)], cwd=tmp_path, capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    module, root, count = r.stdout.split()
    assert module.startswith(str(site)) and root.startswith(str(site)) and int(count) > 5
