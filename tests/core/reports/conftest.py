from __future__ import annotations

import pytest

from nemo_desktop.core.store import ResultsStore


@pytest.fixture
def store(tmp_path):
    s = ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite")
    yield s
    s.close()
