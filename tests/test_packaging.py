"""The wheel and the sdist are complete (every shipped resource, the report fonts, the license), an installed copy
finds its catalog outside the checkout, the metadata is what PyPI shows, the desktop entry and the AppStream
metainfo are valid and name the icon the package ships, and the unpacked sdist runs its own tests."""
from __future__ import annotations

import configparser
import importlib.util
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESOURCES = ROOT / "resources"  # shipped as nemo_desktop/resources/ (setup.py)
PACKAGING = ROOT / "packaging"
DESKTOP = PACKAGING / "desktop" / "nemo-desktop.desktop"
METAINFO = PACKAGING / "org.nemo_desktop.NemoDesktop.metainfo.xml"
README_BASE = "https://example.org/nemo-desktop/v0.1.0/"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The real build backend (setuptools, as pip uses it), without build isolation (no network needed), on a
    copy of the source tree so the checkout gets no build/ or egg-info folders."""
    tmp = tmp_path_factory.mktemp("dist")
    src, out = tmp / "src", tmp / "out"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, timeout=60)
    if tracked.returncode == 0:  # a git checkout: exactly what a clean clone holds (plus new, unignored files)
        for name in tracked.stdout.decode().split("\0"):
            if name and (ROOT / name).is_file():
                (src / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, src / name)
    else:  # an unpacked sdist, or a copy without .git
        skip = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache")

        def ignore(folder, names):  # models_cache/ may hold a portable install's weights: only its README
            if Path(folder) == ROOT / "models_cache":
                return {n for n in names if n != "README.md"}
            return skip(folder, names)
        shutil.copytree(ROOT, src, ignore=ignore)
    built = []
    for hook in ("build_wheel", "build_sdist"):  # one process each: setuptools keeps state between the two
        code = f"import sys; from setuptools import build_meta as b; print(b.{hook}(sys.argv[1]))"
        env = dict(__import__("os").environ, NEMO_README_BASE_URL=README_BASE)  # a release build's setting
        r = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True,
                           timeout=300, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        built.append(out / r.stdout.split()[-1])
    return tuple(built)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _in_wheel() -> dict[str, str]:
    """Source file (relative to the checkout) -> its name in the wheel, for every file the program reads."""
    mapped = {f.relative_to(ROOT).as_posix(): "nemo_desktop/resources/" + f.relative_to(RESOURCES).as_posix()
              for f in _files(RESOURCES)}
    for folder in ("desktop", "icons"):
        mapped |= {f.relative_to(ROOT).as_posix(): f"nemo_desktop/resources/{folder}/{f.name}"
                   for f in _files(PACKAGING / folder)}
    return mapped


def test_the_wheel_holds_every_resource_and_the_license(built):
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = _in_wheel()
    missing = [f for f, name in shipped.items() if name not in names]
    assert not missing and len(shipped) > 25
    assert {"nemo_desktop/resources/icons/nemo-desktop.png", "nemo_desktop/resources/prompts/README.md"} <= names
    assert not [n for n in names if n.startswith(("resources/", "packaging/", "tests/")) or "__pycache__" in n]
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
    assert not [f for f in _in_wheel() if f not in names]
    assert {"LICENSE", "pyproject.toml", "README.md", "setup.py", "MANIFEST.in", "models_cache/README.md"} <= names


def test_the_sdist_holds_the_test_suite_docs_and_benchmarks(built):
    """Everything git tracks under tests/, docs/, benchmarks/, scripts/, packaging/ and .ci/ (conftest.py and
    fixtures_tiny included), and nothing git ignores."""
    _, sdist = built
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for folder in ("tests", "docs", "benchmarks", "scripts", "packaging", ".ci"):
        files = [f.relative_to(ROOT).as_posix() for f in _files(ROOT / folder) if not f.name.endswith(".pyc")]
        assert files and not [f for f in files if f not in names], folder
    assert {"tests/conftest.py", "tests/fixtures_tiny/__init__.py", "docs/screenshots/workbench.png"} <= names
    assert len([n for n in names if n.startswith("tests/") and n.endswith(".py")]) > 150
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".sqlite"))]
    assert not [n for n in names if n.startswith("models_cache/") and n != "models_cache/README.md"]


@pytest.mark.slow
def test_the_unpacked_sdist_runs_its_own_tests(built, tmp_path):
    """A few tests run from the unpacked sdist, importing the package from there (not from this checkout)."""
    _, sdist = built
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    unpacked = next(tmp_path.iterdir())
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("PYTHONPATH", "NEMO_RESOURCES")}
    env["PYTHONPATH"] = str(unpacked)
    tests = ["tests/core/test_resources.py", "tests/test_dependencies.py",
             "tests/test_packaging.py::test_desktop_entry_names_the_shipped_icon_and_the_gui_script"]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=unpacked,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout
    probe = subprocess.run([sys.executable, "-c", "import nemo_desktop; print(nemo_desktop.__file__)"], cwd=unpacked,
                           env=env, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip().startswith(str(unpacked)), probe.stdout + probe.stderr


def test_readme_images_resolve_on_a_package_index_page(built):
    """A release build (NEMO_README_BASE_URL, packaging/README.md) makes every relative link and image of the
    long description absolute; every image the README shows exists in the checkout (and so under the base URL)."""
    wheel, _ = built
    names = zipfile.ZipFile(wheel).namelist()
    meta = Parser().parsestr(zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode())
    body = meta.get_payload()
    assert meta["Description-Content-Type"] == "text/markdown" and "# NEMO Desktop" in body
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", body)
    assert len(images) >= 1 and all(i.startswith(README_BASE) for i in images), images
    assert not re.findall(r"\]\((?!https?://|mailto:|#)[^)\s]+\)", body), "a relative link is left"
    for image in images:
        assert (ROOT / image[len(README_BASE):]).is_file(), image
    spec = importlib.util.spec_from_file_location("nemo_setup", ROOT / "setup.py")
    setup_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_py)  # its setup() runs only as __main__
    assert setup_py.long_description("") == (ROOT / "README.md").read_text(encoding="utf-8")  # a plain build


def test_license_file_is_the_declared_license():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()


def test_desktop_entry_names_the_shipped_icon_and_the_gui_script():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(DESKTOP)
    de = entry["Desktop Entry"]
    icons = PACKAGING / "icons"
    assert (icons / f"{de['Icon']}.png").is_file() and (icons / f"{de['Icon']}.svg").is_file()
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


def test_metainfo_names_the_desktop_entry_the_launchers_and_the_license():
    import xml.etree.ElementTree as ET

    root = ET.parse(METAINFO).getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert METAINFO.name == root.findtext("id") + ".metainfo.xml"
    assert root.findtext("launchable[@type='desktop-id']") == DESKTOP.name
    assert {b.text for b in root.iter("binary")} == {"nemo", "nemo-desktop"}
    assert root.findtext("project_license") == "Apache-2.0"
    version = tomllib_version()
    assert root.find("releases/release").get("version") == version, "add a <release> for the new version"


def tomllib_version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.skipif(shutil.which("appstreamcli") is None,
                    reason="needs appstreamcli (Debian package appstream; .ci/run installs it)")
def test_metainfo_passes_appstreamcli_validate():
    r = subprocess.run(["appstreamcli", "validate", "--no-net", str(METAINFO)], capture_output=True,
                       text=True, timeout=60)
    out = r.stdout + r.stderr
    # No errors and no warnings (the one pedantic note is the id's upper-case letters, the usual NemoDesktop style).
    assert r.returncode == 0 and not [line for line in out.splitlines() if line[:2] in ("E:", "W:", "I:")], out


def _in_unpacked_wheel(built, tmp_path: Path, code: str) -> tuple[Path, str]:
    """The wheel's files on sys.path instead of the checkout (what an installed copy sees): its folder, and what
    `code` prints there (sys.argv[1] is the folder)."""
    wheel, _ = built
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("PYTHONPATH", "NEMO_RESOURCES")}
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); " + code, str(site)],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return site, r.stdout


def test_an_unpacked_wheel_reads_its_catalog_outside_the_checkout(built, tmp_path):
    site, out = _in_unpacked_wheel(built, tmp_path, "import nemo_desktop; "
                                   "from nemo_desktop.core.base.resources import resources_root; "
                                   "from nemo_desktop.core.models.catalog import list_catalog; "
                                   "print(nemo_desktop.__file__); print(resources_root()); print(len(list_catalog()))")
    module, root, count = out.split()
    assert module.startswith(str(site)) and root.startswith(str(site)) and int(count) > 5


def test_the_wheel_registers_its_analyses_as_entry_points(built, tmp_path):
    """One registration shape: the wheel declares NEMO Desktop's own analyses in the `nemo_desktop.analyses` group
    (the list the code falls back on for a checkout agrees), and an installed copy loads every one from there."""
    from nemo_desktop.core.registry.registry import BUILTIN_ENTRY_POINTS

    site, out = _in_unpacked_wheel(
        built, tmp_path, "from importlib.metadata import entry_points; "
        "eps = [e for e in entry_points(group='nemo_desktop.analyses') if e.dist.name == 'nemo-desktop']; "
        "loaded = [s for e in eps for s in (lambda o: o if isinstance(o, tuple) else (o,))(e.load())]; "
        "from nemo_desktop.core.registry import list_analyses; "
        "print(sorted(s.name for s in loaded) == list_analyses(), loaded[0].factory.__module__.split('.')[0], "
        "__import__('nemo_desktop').__file__.startswith(sys.argv[1]))")
    assert out.split() == ["True", "nemo_desktop", "True"]
    (declared,) = site.glob("nemo_desktop-*.dist-info/entry_points.txt")
    entry_points = configparser.ConfigParser()
    entry_points.read_string(declared.read_text())
    assert dict(entry_points["nemo_desktop.analyses"]) == BUILTIN_ENTRY_POINTS
