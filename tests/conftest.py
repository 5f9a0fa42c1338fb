"""Suite-wide guarantees: no test touches the network, user data, or the user's Hugging Face cache."""
from __future__ import annotations

import os
import tempfile

import pytest

import network_guard

# Set before anything imports huggingface_hub / transformers (they read these at import time).
_SESSION_TMP = tempfile.mkdtemp(prefix="nemo-tests-")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HOME"] = os.path.join(_SESSION_TMP, "hf_home")
os.environ["NEMO_HOME"] = os.path.join(_SESSION_TMP, "nemo_home")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.pop("HF_TOKEN", None)

# Python child processes of tests import tests/sitecustomize.py at start-up, which installs the same guard.
_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
os.environ["NEMO_TEST_NETWORK_GUARD"] = "1"
_inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != _TESTS_DIR]
os.environ["PYTHONPATH"] = os.pathsep.join([_TESTS_DIR, *_inherited])

network_guard.install()


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """Every test gets its own NEMO_HOME so settings, store and logs never leak between tests."""
    monkeypatch.setenv("NEMO_HOME", str(tmp_path / "nemo_home"))
    monkeypatch.delenv("NEMO_PORTABLE", raising=False)
    # Portable mode (a test running `main(["--portable-dir", ...])`) sets TORCH_HOME: recorded, undone after the test.
    monkeypatch.setenv("TORCH_HOME", os.environ.get("TORCH_HOME", ""))
    if not os.environ["TORCH_HOME"]:
        monkeypatch.delenv("TORCH_HOME")
    yield


@pytest.fixture
def without(monkeypatch):
    """without("pdf", ...) makes those extras look uninstalled (their modules not found)."""
    from nemo_desktop.core.base import extras

    def hide(*names):
        real = extras.missing_modules
        monkeypatch.setattr(extras, "missing_modules",
                            lambda name: list(extras.EXTRAS[name].modules) if name in names else real(name))
    return hide
