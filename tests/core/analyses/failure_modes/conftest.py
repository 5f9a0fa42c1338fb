"""Fixtures of the failure-modes tests: the digits colour world (a real CNN with a colour shortcut, trained
once per session) rendered in random inks as an indexed CSV manifest with attribute columns."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "methods"))  # digits_world lives there


@pytest.fixture(scope="session")
def digits():
    import torch

    from digits_world import train_digits_cnn

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    return train_digits_cnn(seed=0)


@pytest.fixture(scope="session")
def ink_manifest(digits, tmp_path_factory):
    from fm_digits_world import write_ink_manifest

    return write_ink_manifest(tmp_path_factory.mktemp("ink_world"), digits)


@pytest.fixture(scope="session")
def _ink_index_master(digits, ink_manifest, tmp_path_factory):
    """A store holding the CNN's reference index of the ink world, built once per session."""
    from digits_world import DigitsCNNClassifier
    from nemo_desktop.core.data.datasets import CsvManifestDataset
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.store import ResultsStore

    root = tmp_path_factory.mktemp("ink_store")
    with ResultsStore.open(db_path=root / "results.sqlite", artifacts_dir=root / "artifacts") as s:
        index_id = build_index(CsvManifestDataset(ink_manifest), DigitsCNNClassifier(digits[0]), s).index_id
    return root, index_id


@pytest.fixture(scope="session")
def _measured_space(digits):
    from fm_digits_world import MeasuredFactorSpace

    return MeasuredFactorSpace(digits[2][0], digits[2][1])


@pytest.fixture
def ink_world(_ink_index_master, _measured_space, digits, tmp_path):
    """(classifier, index, fresh embedder, store): a private copy of the session's indexed store."""
    import shutil

    from digits_world import DigitsCNNClassifier
    from nemo_desktop.core.data.reference_index import ReferenceIndex
    from nemo_desktop.core.store import ResultsStore

    root, index_id = _ink_index_master
    copy = shutil.copytree(root, tmp_path / "ink_store")
    s = ResultsStore.open(db_path=copy / "results.sqlite", artifacts_dir=copy / "artifacts")
    yield DigitsCNNClassifier(digits[0]), ReferenceIndex.load(s, index_id), _measured_space.fresh(), s
    s.close()


@pytest.fixture
def store(tmp_path):
    from nemo_desktop.core.store import ResultsStore

    s = ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite", artifacts_dir=tmp_path / "store" / "artifacts")
    yield s
    s.close()
