"""GUI tests run offscreen (no display needed) with NEMO_HOME in a temporary folder."""
from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import pytest  # noqa: E402
from model_process import set_model_process  # noqa: E402


@pytest.fixture(autouse=True)
def gui_home(tmp_path, monkeypatch):
    """Settings, window layout and logs of each test live in its own NEMO_HOME."""
    home = tmp_path / "nemo_home"
    monkeypatch.setenv("NEMO_HOME", str(home))
    monkeypatch.delenv("NEMO_PORTABLE", raising=False)
    return home


# How long a test's jobs may take to stop at teardown. It asserts that they stop, not how fast: on a loaded
# 2-core machine a queued job the pool had already started (cancel cannot take it back) was seen to need over
# 5 s to reach its first cancel check (tests/gui/test_small_defects_28.py, once in four full runs).
STOP_BOUND_MS = 30_000


@pytest.fixture
def runner(qtbot):
    from nemo_desktop.gui.jobs import JobRunner

    r = JobRunner(io_threads=2)
    yield r
    assert r.shutdown(STOP_BOUND_MS), f"test jobs did not stop: {r.active_jobs()}"


@pytest.fixture
def make_window(qtbot):
    """Build main windows; at the end their jobs are stopped first, then they are closed and deleted (not by
    pytest-qt, whose deletion could run inside the wait for the jobs)."""
    windows = []

    def make(model_process: str | None = None, **kwargs):
        """`model_process`: "in-process" for a test that puts models into the window's own session (the model
        worker would not have them), "worker" to say so; None: the settings' (the app's default, the worker)."""
        from nemo_desktop.gui.main_window import MainWindow

        if model_process is not None:
            set_model_process(model_process, kwargs.get("paths"))
        window = MainWindow(**kwargs)
        windows.append(window)
        return window

    yield make
    import shiboken6

    for window in windows:
        if shiboken6.isValid(window):
            assert window.jobs.shutdown(STOP_BOUND_MS), f"test jobs did not stop: {window.jobs.active_jobs()}"
            window.close()
            window.deleteLater()


# -- the digits world: a real small classifier with a real colour shortcut, and honest test doubles for the
# multimodal LLM and the editor (tests/core/methods/digits_world.py), shared with the SciTX tests.
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

_METHODS_TESTS = str(Path(__file__).resolve().parents[1] / "core" / "methods")
if _METHODS_TESTS not in sys.path:
    sys.path.insert(0, _METHODS_TESTS)


@pytest.fixture(scope="session")
def digits():
    """(trained CNN, (test scans, labels), (train scans, labels)); trained once per session."""
    import torch

    from digits_world import train_digits_cnn

    torch.set_num_threads(1)
    return train_digits_cnn(seed=0, epochs=4)


@pytest.fixture(scope="session")
def digits_reference(digits, tmp_path_factory):
    """A dataset folder (one sub-folder per class) of five training digits per class in their training inks."""
    from digits_world import write_reference

    return write_reference(tmp_path_factory.mktemp("digits_reference"), digits, per_class=5)


@pytest.fixture(scope="session")
def blue_three(digits, tmp_path_factory):
    """A held-out 'three' drawn in blue, which the CNN takes for an 'eight' (the colour shortcut)."""
    from digits_world import save_misclassified_blue_three

    return save_misclassified_blue_three(digits, tmp_path_factory.mktemp("query"))


@pytest.fixture
def digits_window(make_window, digits):
    """A main window whose session holds the digits CNN, the scripted MLLM and the PIL editor."""
    from digits_world import DigitsCNNClassifier, DigitsEditor, ScriptedDigitsMLLM

    window = make_window(model_process="in-process")  # the models are put into the window's own session
    window.session.put("classifier", "digits-cnn", DigitsCNNClassifier(digits[0]))
    window.session.put("mllm", "scripted-digits-mllm", ScriptedDigitsMLLM())
    window.session.put("editor", "digits-editor", DigitsEditor())
    window.sig_models_changed.emit()
    return window
