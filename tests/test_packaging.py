"""The wheel and the sdist are complete (every shipped resource, the report fonts, the license), an installed copy
finds its catalog outside the checkout, the metadata is what PyPI shows, and the desktop entry is valid and names
the icon the package ships."""
from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESOURCES = ROOT / "nemo_desktop" / "resources"
DESKTOP = RESOURCES / "desktop" / "nemo-desktop.desktop"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The real build backend (setuptools, as pip uses it), without build isolation (no network needed), on a
    copy of the source tree so the checkout gets no build/ or egg-info folders."""
    tmp = tmp_path_factory.mktemp("dist")
    src, out = tmp / "src", tmp / "out"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "models_cache", "build", "*.egg-info",
                                                              "__pycache__", ".pytest_cache", "tests", "docs"))
    built = []
    for hook in ("build_wheel", "build_sdist"):  # one process each: setuptools keeps state between the two
        code = f"import sys; from setuptools import build_meta as b; print(b.{hook}(sys.argv[1]))"
        r = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        built.append(out / r.stdout.split()[-1])
    return tuple(built)


def _shipped() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in RESOURCES.rglob("*") if p.is_file()
                  and "__pycache__" not in p.parts)


def test_the_wheel_holds_every_resource_and_the_license(built):
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in _shipped() if f not in names]
    assert not missing and len(_shipped()) > 25
    assert "nemo_desktop/core/reports/fonts/DejaVuSans.ttf" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = Parser().parsestr(zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode())
    assert meta["License-Expression"] == "Apache-2.0"
    assert "Topic :: Scientific/Engineering :: Artificial Intelligence" in meta.get_all("Classifier")
    assert "counterfactual" in meta["Keywords"] and meta.get_all("Project-URL")
    requires = meta.get_all("Requires-Dist")
    assert meta["Requires-Python"] == ">=3.11" and not any(r.startswith("tomli") for r in requires)
    assert any(r.startswith("json-repair") for r in requires) and any(r.startswith("shtab") for r in requires)


def test_the_sdist_holds_every_resource_and_the_license(built):
    _, sdist = built
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert not [f for f in _shipped() if f not in names]
    assert {"LICENSE", "pyproject.toml", "README.md"} <= names


def test_license_file_is_the_declared_license():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()


def test_desktop_entry_names_the_shipped_icon_and_the_gui_script():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(DESKTOP)
    de = entry["Desktop Entry"]
    assert (RESOURCES / "icons" / f"{de['Icon']}.png").is_file() and (RESOURCES / "icons" / f"{de['Icon']}.svg").is_file()
    assert de["Exec"].split()[0] == "nemo-desktop" and 'nemo-desktop = "nemo_desktop.gui.app:main"' in \
        (ROOT / "pyproject.toml").read_text()
    main_categories = {"AudioVideo", "Audio", "Video", "Development", "Education", "Game", "Graphics", "Network",
                       "Office", "Science", "Settings", "System", "Utility"}
    assert len([c for c in de["Categories"].split(";") if c in main_categories]) == 1


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None,
                    reason="needs desktop-file-validate (Debian desktop-file-utils; .ci/run installs it)")
def test_desktop_entry_passes_desktop_file_validate():
    r = subprocess.run(["desktop-file-validate", str(DESKTOP)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr  # no errors, no hints


def test_an_unpacked_wheel_reads_its_catalog_outside_the_checkout(built, tmp_path):
    # The wheel's files on sys.path instead of the checkout: what an installed copy sees.
    wheel, _ = built
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
