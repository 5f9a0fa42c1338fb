"""The data files the program reads ship inside the package (nemo_desktop/resources), found through
importlib.resources; NEMO_RESOURCES replaces them with a user's copy; check_resources finds what is missing."""
from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest

import nemo_desktop
from nemo_desktop.core.errors import ConfigError
from nemo_desktop.core.resource_check import check_resources, required
from nemo_desktop.core.resources import resource_path, resources_root


def test_resources_live_inside_the_package(monkeypatch):
    monkeypatch.delenv("NEMO_RESOURCES", raising=False)
    root = resources_root()
    assert root == Path(nemo_desktop.__file__).parent / "resources"
    assert root == Path(str(resources.files("nemo_desktop") / "resources"))
    assert all(root.joinpath(*parts).is_file() for parts in required())
    assert all(row["ok"] for row in check_resources()), check_resources()


def test_a_user_copy_replaces_the_shipped_files(tmp_path, monkeypatch):
    copy = tmp_path / "my-resources"
    shutil.copytree(resources_root(), copy)
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


def test_doctor_checks_every_file_the_package_ships():
    """A resource added to the package without an entry in REQUIRED would go unchecked by `nemo doctor`."""
    shipped = Path(nemo_desktop.__file__).parent / "resources"
    covered = {shipped.joinpath(*parts) for parts in required()}
    files = [f for f in shipped.rglob("*") if f.is_file() and f.name != "README.md" and "__pycache__" not in f.parts]
    unchecked = [str(f.relative_to(shipped)) for f in files if f not in covered]
    assert len(files) > 25 and unchecked == []
