"""Fixtures for the data layer: digits rendered to PNG folders, a trained digits MLP, a fresh store."""
from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays, write_digit_folder
from nemo_desktop.core.store import ResultsStore

from data_world import N_REFERENCE


@pytest.fixture(scope="session")
def digits():
    return load_digits_arrays()


@pytest.fixture(scope="session")
def digits_classifier(digits):
    X, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DigitsMLPClassifier.train(X[N_REFERENCE:], y[N_REFERENCE:])


@pytest.fixture(scope="session")
def _digits_folder_master(tmp_path_factory, digits):
    X, y = digits
    root = tmp_path_factory.mktemp("digits") / "digits"
    write_digit_folder(root, X[:N_REFERENCE], y[:N_REFERENCE])
    return root


@pytest.fixture
def digits_folder(tmp_path, _digits_folder_master):
    """A private copy (tests add, modify and remove files)."""
    return shutil.copytree(_digits_folder_master, tmp_path / "digits")


@pytest.fixture
def store(tmp_path):
    s = ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite")
    yield s
    s.close()


@pytest.fixture
def fresh_classifier(digits_classifier):
    """The session's classifier with its image counter reset (the MLP itself is shared, read-only)."""
    digits_classifier.images_seen = 0
    return digits_classifier
