"""Preflight (issue 19): a method names every model it lacks before loading any, in well under a second; Cancel
during a model load ends as cancelled, not as an error."""
from __future__ import annotations

import time

import pytest

from nemo_desktop.core.base.errors import JobCancelled, WeightsNotFoundError
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.app.samples import Sample


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing downloaded
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_a_method_names_every_missing_model_at_once_and_fast(empty_cache, tmp_path, monkeypatch):
    from PIL import Image

    image = tmp_path / "query.png"
    Image.new("RGB", (16, 16)).save(image)
    import nemo_desktop.core.models.families as registry
    from nemo_desktop.core.app.jobs.models import explain_samples
    from nemo_desktop.core.app.session import ModelSession

    loads = []
    monkeypatch.setattr(registry, "load_model", lambda *a, **k: loads.append(a) or pytest.fail("loaded a model"))
    session = ModelSession()
    t = time.perf_counter()
    with pytest.raises(WeightsNotFoundError) as err:
        explain_samples(session, "scitx", {}, [Sample(str(image), "three")], None, JobContext())
    seconds = time.perf_counter() - t
    message = err.value.message
    assert "classifier vit-b16-augreg2 is not downloaded" in message
    assert "qwen2.5-vl-7b is not downloaded" in message
    assert "flux-kontext-dev is not downloaded" in message and "Model manager" in err.value.hint
    assert seconds < 1.0, f"preflight took {seconds:.2f} s"
    assert loads == []


def test_a_zero_shot_default_classifier_needs_no_editor(empty_cache):
    from nemo_desktop.core.app.session import ModelSession

    session = ModelSession()
    session.update_settings(lambda s: setattr(s.models, "classifier", "clip-vit-b32"))
    assert session.classifier_is_zero_shot()
    with pytest.raises(WeightsNotFoundError) as err:
        session.preflight(["classifier"])
    assert "clip-vit-b32" in err.value.message and "editor" not in err.value.message


def test_cancel_during_a_model_load_ends_as_cancelled(monkeypatch):
    import nemo_desktop.core.models.families as registry
    from nemo_desktop.core.app.session import ModelSession

    token = CancelToken()

    def interrupted_load(spec, options):
        token.cancel()  # the user presses Cancel while the weights load...
        raise OSError("read interrupted")  # ...and the interrupted load raises what it raises

    monkeypatch.setattr(registry, "load_model", interrupted_load)
    session = ModelSession()
    with pytest.raises(JobCancelled, match="was cancelled"):
        session.load("classifier", "resnet50", JobContext(cancel=token))
    monkeypatch.setattr(registry, "load_model", lambda spec, options: (_ for _ in ()).throw(OSError("disk")))
    with pytest.raises(OSError):  # without a cancel, a failure stays a failure
        session.load("classifier", "resnet50", JobContext())


def test_observations_offer_every_fitting_index_including_a_new_one(qtbot, digits_window, digits_reference, digits,
                                                                    tmp_path):
    from digits_world import DigitsCNNClassifier

    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.models.protocols import ModelInfo

    window = digits_window
    other = DigitsCNNClassifier(digits[0])
    other.info = ModelInfo("another-classifier", "test-double", "1")
    foreign = build_index(digits_reference, other, window.session.store())  # built with another classifier
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("workbench")
    qtbot.waitUntil(lambda: bool(pane.methods), timeout=20000)

    def offered():
        return [pane.reference_combo.itemData(i) for i in range(2, pane.reference_combo.count())]

    qtbot.wait(300)
    assert foreign.index_id not in offered()  # it does not fit the loaded classifier
    browser = window.show_pane("dataset_browser")
    with qtbot.waitSignal(browser.sig_opened, timeout=20000):
        browser.open_path(digits_reference)
    with qtbot.waitSignal(browser.sig_opened, timeout=60000) as indexed:
        browser.index_dataset()
    new_id = indexed.args[0].index_id
    qtbot.waitUntil(lambda: not browser.thumbnails.busy, timeout=10000)
    window.show_pane("workbench")
    qtbot.waitUntil(lambda: new_id in offered(), timeout=10000)  # built a moment ago, offered on return
    assert foreign.index_id not in offered()
