"""Fixtures for the results-store and settings tests: every test gets its own NEMO_HOME."""
from __future__ import annotations

import pytest

from nemo_desktop.core.store import ResultsStore


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_HOME", str(tmp_path / "nemo_home"))
    monkeypatch.delenv("NEMO_PORTABLE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "store" / "results.sqlite"


@pytest.fixture
def store(db_path):
    s = ResultsStore.open(db_path=db_path)
    yield s
    s.close()
