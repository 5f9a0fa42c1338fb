"""The data files the program reads: the checkout's top-level resources/ (desktop entry and icons in packaging/),
shipped inside the package as nemo_desktop/resources (tests/test_packaging.py checks the wheel), found through
importlib.resources; NEMO_RESOURCES replaces them with a user's copy; check_resources finds what is missing."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import nemo_desktop
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.resource_check import check_resources, required
from nemo_desktop.core.base.resources import (PACKAGING_FOLDERS, resource_file, resource_path, resources_root,
                                              shipped_root)


ROOT = Path(nemo_desktop.__file__).resolve().parents[1]


def installed_layout_copy(dest: Path) -> Path:
    """What an installed copy's nemo_desktop/resources/ holds: resources/ plus packaging/'s desktop entry and icons."""
    shutil.copytree(resources_root(), dest)
    for folder in PACKAGING_FOLDERS:
        shutil.copytree(ROOT / "packaging" / folder, dest / folder)
    return dest


def test_a_checkout_reads_the_top_level_resources_folder(monkeypatch):
    monkeypatch.delenv("NEMO_RESOURCES", raising=False)
    root = resources_root()
    assert not (Path(nemo_desktop.__file__).parent / "resources").exists()  # only the wheel has it there
    assert root == ROOT / "resources" == shipped_root()
    assert resource_path("icons", "nemo-desktop.png") == ROOT / "packaging" / "icons" / "nemo-desktop.png"
    assert resource_path("prompts") == root / "prompts"
    assert all(resource_file(*parts).is_file() for parts in required())
    assert all(row["ok"] for row in check_resources()), check_resources()


def test_an_installed_package_reads_its_own_folder(tmp_path, monkeypatch):
    """A package folder with resources/ inside (as the wheel installs it) is read through importlib.resources."""
    monkeypatch.delenv("NEMO_RESOURCES", raising=False)
    fake = tmp_path / "nemo_desktop"
    installed_layout_copy(fake / "resources")
    monkeypatch.setattr("nemo_desktop.core.base.resources._ilr.files", lambda package: fake)
    assert resources_root() == fake / "resources"
    assert resource_path("icons", "nemo-desktop.svg") == fake / "resources" / "icons" / "nemo-desktop.svg"
    assert all(row["ok"] for row in check_resources()), check_resources()


def test_a_user_copy_replaces_the_shipped_files(tmp_path, monkeypatch):
    copy = installed_layout_copy(tmp_path / "my-resources")
    (copy / "catalog.json").unlink()
    (copy / "prompts" / "json_repair.v1.txt").unlink()  # a prompt the package ships, missing from the copy
    monkeypatch.setenv("NEMO_RESOURCES", str(copy))
    assert resource_path("prompts") == copy / "prompts"
    with pytest.raises(ConfigError, match="missing") as err:
        resource_path("catalog.json")
    bad = {row["resource"]: row for row in check_resources() if not row["ok"]}
    assert sorted(bad) == ["catalog.json", "prompts/json_repair.v1.txt"] and bad["catalog.json"]["problem"]


def test_nemo_resources_that_is_not_a_folder_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RESOURCES", str(tmp_path / "nothing-here"))
    with pytest.raises(ConfigError, match="missing") as err:
        resources_root()
    assert "NEMO_RESOURCES" in err.value.hint
    rows = check_resources()
    assert len(rows) == 1 and not rows[0]["ok"] and "nothing-here" in rows[0]["problem"]


def test_doctor_checks_every_file_the_package_ships(tmp_path):
    """A resource added to the package without an entry in REQUIRED would go unchecked by `nemo doctor`."""
    shipped = installed_layout_copy(tmp_path / "resources")
    covered = {shipped.joinpath(*parts) for parts in required()}
    files = [f for f in shipped.rglob("*") if f.is_file() and f.name != "README.md" and "__pycache__" not in f.parts]
    unchecked = [str(f.relative_to(shipped)) for f in files if f not in covered]
    assert len(files) > 25 and unchecked == []
