"""The core's named layers (pyproject.toml's import-linter contracts, run by tests/test_qt_boundary.py):

- core/ holds packages only (besides its __init__), and the layers contract names every one of them, so a new
  package cannot sit outside the layers unchecked;
- no module inside the package imports a path that moved or a re-export shim that was deleted (issue 41), and
  every `from nemo_desktop... import` inside the package names a module that exists;
- the contracts have teeth: the base importing the app layer breaks the layers, a circle inside the base breaks
  its acyclic contract.
"""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nemo_desktop"
CORE = PACKAGE / "core"

# Old module paths (moved into core/base, core/app, core/registry, or deleted re-export shims).
OLD_MODULES = (
    "nemo_desktop.core.errors", "nemo_desktop.core.secrets", "nemo_desktop.core.jobs", "nemo_desktop.core.records",
    "nemo_desktop.core.resources", "nemo_desktop.core.resource_check", "nemo_desktop.core.extras",
    "nemo_desktop.core.images", "nemo_desktop.core.image_borders", "nemo_desktop.core.image_difference",
    "nemo_desktop.core.confine", "nemo_desktop.core.plugins", "nemo_desktop.core.batch",
    "nemo_desktop.core.logging_setup", "nemo_desktop.core.session", "nemo_desktop.core.session_jobs",
    "nemo_desktop.core.samples", "nemo_desktop.core.browse_data", "nemo_desktop.core.analytics",
    "nemo_desktop.core.app_jobs", "nemo_desktop.core.worker", "nemo_desktop.core.models.device",
    "nemo_desktop.core.models.registry", "nemo_desktop.core.methods.registry", "nemo_desktop.core.methods.result",
    "nemo_desktop.gui.session", "nemo_desktop.gui.samples", "nemo_desktop.gui.panes.dataset_browser.browse_data",
    "nemo_desktop.gui.panes.dataset_browser.competency_column", "nemo_desktop.gui.panes.analyses.failure_mode_jobs",
    "nemo_desktop.gui.panes.analyses.run_job",
)
_OLD_TEXT = re.compile(r"(?<![\w.])(" + "|".join(re.escape(m) for m in sorted(OLD_MODULES, key=len, reverse=True))
                       + r")(?![\w])")


def _core_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layered = [c for c in contracts if c["type"] == "layers" and any("nemo_desktop.core." in layer
                                                                     for layer in c["layers"])]
    assert len(layered) == 1, "one layers contract for the core's packages"
    return [name.strip() for layer in layered[0]["layers"] for name in layer.split("|")]


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _imports(path: Path):
    """(line, absolute module) for every import in `path`, relative ones resolved."""
    module, is_pkg = _module_name(path)
    package = module.split(".") if is_pkg else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[:len(package) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            yield node.lineno, base, [a.name for a in node.names]


def _exists(module: str) -> bool:
    path = ROOT / Path(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_core_holds_packages_only():
    loose = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules at core/ top level (put each in its layer's package): {loose}"


def test_the_layers_contract_names_every_package_of_core():
    packages = {f"nemo_desktop.core.{p.name}" for p in CORE.iterdir() if (p / "__init__.py").is_file()}
    layers = _core_layers()
    assert packages - set(layers) == set(), "packages of core/ missing from the layers contract"
    assert set(layers) - packages == set(), "the layers contract names packages core/ does not have"


def test_no_old_or_shim_path_is_imported_inside_the_package():
    stale = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT)
        for line, module, names in _imports(path):
            targets = [module] + [f"{module}.{n}" for n in names or () if n != "*"]
            for target in targets:
                if _OLD_TEXT.fullmatch(target) or any(target.startswith(old + ".") for old in OLD_MODULES):
                    stale.append(f"{rel}:{line}: {target}")
            if module.startswith("nemo_desktop") and not _exists(module):
                stale.append(f"{rel}:{line}: {module} does not exist")
        # job targets ("module:function"), monkeypatch paths and other dotted names in strings
        for m in _OLD_TEXT.finditer(path.read_text(encoding="utf-8")):
            line = path.read_text(encoding="utf-8").count("\n", 0, m.start()) + 1
            stale.append(f"{rel}:{line}: {m.group(1)} (in text)")
    assert stale == [], "\n".join(stale)


def test_the_contracts_catch_an_arrow_back_up_and_a_circle(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "nemo_desktop", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    base = tmp_path / "nemo_desktop" / "core" / "base"
    (base / "reaches_up.py").write_text("from nemo_desktop.core.app import session  # noqa: F401\n")
    # the circle issue 41 found: the errors redact through secrets, and secrets raise errors
    with (base / "secrets.py").open("a") as f:
        f.write("\nfrom nemo_desktop.core.base.errors import ConfigError  # noqa: E402,F401\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[1] + '/pyproject.toml'))")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "nemo_desktop.core.base.reaches_up -> nemo_desktop.core.app.session" in result.stdout
    assert "No cycles are allowed in nemo_desktop.core.base" in result.stdout
