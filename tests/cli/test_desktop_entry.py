"""`nemo desktop-entry`: the shipped entry, rewritten to this installation's launcher, installed with its icon
under XDG_DATA_HOME; the installed entry still passes desktop-file-validate."""
from __future__ import annotations

import configparser
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nemo_desktop.cli.commands import desktop_entry
from nemo_desktop.cli.main import main
from nemo_desktop.core.base.resources import resource_path


def _read(path):
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(path)
    return entry["Desktop Entry"]


def test_install_writes_the_entry_and_icons_naming_this_installations_launcher(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    launcher = tmp_path / "venv bin" / "nemo-desktop"  # a space: Exec must quote it
    launcher.parent.mkdir()
    launcher.write_text("#!/bin/sh\n")
    monkeypatch.setattr(desktop_entry.sysconfig, "get_path", lambda name: str(launcher.parent))
    assert main(["desktop-entry", "--install", "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    entry = _read(written["entry"])
    assert written["entry"] == str(tmp_path / "share" / "applications" / "nemo-desktop.desktop")
    assert entry["Exec"] == f'"{launcher}"' and entry["TryExec"] == str(launcher) and entry["Icon"] == "nemo-desktop"
    png, svg = map(Path, written["icons"])
    assert png == tmp_path / "share/icons/hicolor/256x256/apps/nemo-desktop.png"
    assert png.read_bytes() == resource_path("icons", "nemo-desktop.png").read_bytes()
    assert svg.name == "nemo-desktop.svg" and svg.parent.parent.name == "scalable"
    if shutil.which("desktop-file-validate"):
        r = subprocess.run(["desktop-file-validate", written["entry"]], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not r.stdout.strip(), r.stdout


def test_without_install_it_prints_the_entry_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    monkeypatch.setattr(desktop_entry.sysconfig, "get_path", lambda name: str(tmp_path / "nowhere"))
    monkeypatch.setattr(desktop_entry.shutil, "which", lambda name: None)
    assert main(["desktop-entry"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("[Desktop Entry]\n") and "\nExec=nemo-desktop\n" in text  # no launcher found: bare name
    assert not (tmp_path / "share").exists()


def test_an_unwritable_data_folder_is_a_clear_runtime_error(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))
    assert main(["desktop-entry", "--install", "--json"]) == 3
    error = json.loads(capsys.readouterr().out)["error"]
    assert "Cannot write the desktop entry" in error["message"] and "XDG_DATA_HOME" in error["hint"]


@pytest.mark.parametrize("xdg", ["", "relative/path"])
def test_xdg_data_home_unset_or_relative_means_local_share(xdg, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", xdg)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert desktop_entry.data_home() == tmp_path / ".local" / "share"  # the spec: a relative value is invalid
