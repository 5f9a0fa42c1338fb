import pytest


@pytest.fixture
def store(tmp_path):
    from nemo_desktop.core.store import ResultsStore

    s = ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite", artifacts_dir=tmp_path / "store" / "artifacts")
    yield s
    s.close()
