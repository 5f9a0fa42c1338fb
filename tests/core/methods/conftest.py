"""Fixtures for the SciTX tests: the digits world (a CNN trained once per session) and reference folders."""
from __future__ import annotations

import pytest

from digits_world import DigitsCNNClassifier, save_misclassified_blue_three, train_digits_cnn, write_reference


@pytest.fixture(scope="session")
def digits():
    """(trained model, (test scans, test labels), (train scans, train labels)); trained once (~5 s)."""
    import torch

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    return train_digits_cnn(seed=0)


@pytest.fixture
def digits_classifier(digits):
    return DigitsCNNClassifier(digits[0])


@pytest.fixture(scope="session")
def blue_three(digits, tmp_path_factory):
    """Path of a held-out 'three' drawn in blue that the CNN takes for an 'eight'."""
    return save_misclassified_blue_three(digits, tmp_path_factory.mktemp("query"))


@pytest.fixture(scope="session")
def reference_folder(digits, tmp_path_factory):
    return write_reference(tmp_path_factory.mktemp("reference"), digits)


@pytest.fixture
def store(tmp_path):
    from nemo_desktop.core.store import ResultsStore

    s = ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite", artifacts_dir=tmp_path / "store" / "artifacts")
    yield s
    s.close()
