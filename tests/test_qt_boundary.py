"""The core and the CLI never import Qt: enforced with import-linter's contract from pyproject.toml.

import-linter follows imports transitively (core -> some helper -> PySide6 is caught too). The second test
proves the check has teeth: it copies the package, plants a Qt import deep in the core, and expects failure.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint(project_dir: Path) -> subprocess.CompletedProcess:
    # Run in a fresh interpreter whose sys.path starts at project_dir, so grimp analyses that copy.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[1] + '/pyproject.toml'))")
    return subprocess.run([sys.executable, "-c", code, str(project_dir)], capture_output=True, text=True,
                          cwd=project_dir, timeout=300)


def test_core_and_cli_do_not_import_qt():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout


def test_boundary_check_catches_a_violation(tmp_path):
    shutil.copytree(ROOT / "nemo_desktop", tmp_path / "nemo_desktop",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    # An indirect violation: a core module imports a helper that imports Qt.
    (tmp_path / "nemo_desktop" / "core" / "sneaky_helper.py").write_text("from PySide6 import QtCore\n")
    (tmp_path / "nemo_desktop" / "core" / "metrics" / "uses_helper.py").write_text(
        "from .. import sneaky_helper\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "PySide6" in result.stdout
