"""The app's memory profile (issue 40 §4, the Model manager's part): `compute.memory_profile` in the settings
reaches every model load of the session as the CLI's --profile does, a profile that cannot fit is refused in
words before anything is released or loaded, and `profile_advice` names the profile that fits the card."""
from __future__ import annotations

from pathlib import Path

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.models.catalog import get_entry
from nemo_desktop.core.models.profiles import GIB, PROFILES, advice
from nemo_desktop.core.app.session import ModelSession


@pytest.fixture
def demo_classifier():
    from demo_cache import install_built_demo

    from nemo_desktop.core.demo import CLASSIFIER_ID, prepare_demo
    from nemo_desktop.core.store.paths import get_paths

    install_built_demo(get_paths())
    prepare_demo(get_paths())
    return CLASSIFIER_ID


def _choose(session, name):
    session.update_settings(lambda s: setattr(s.compute, "memory_profile", name))


def test_the_settings_profile_is_used_by_every_load_and_remembered_for_a_restore(demo_classifier):
    session = ModelSession()
    _choose(session, "CPU")
    assert session.settings().compute.memory_profile == "CPU"  # saved and read back
    session.load("classifier", demo_classifier)
    record = session.wanted()["classifier"]
    assert record["profile"] == "CPU" and record["options"]["device"] == "cpu"
    # A new model process loads it again under the profile it was loaded with, whatever the settings say now.
    _choose(session, None)
    fresh = ModelSession()
    assert fresh.restore(session.wanted())["restored"] == [("classifier", demo_classifier)]
    assert fresh.wanted()["classifier"]["profile"] == "CPU"
    fresh.unload("classifier")
    session.unload("classifier")


def test_a_gpu_profile_on_no_gpu_is_refused_before_the_model_in_memory_is_released(demo_classifier, monkeypatch):
    from nemo_desktop.core.base import device

    monkeypatch.setattr(device, "gpu_info", lambda: [])  # this machine: no CUDA GPU
    session = ModelSession()
    session.load("classifier", demo_classifier)
    _choose(session, "24 GB")
    with pytest.raises(ConfigError, match="The '24 GB' profile needs a CUDA GPU, and none was found"):
        session.load("classifier", "resnet50")  # in the catalog, weights not needed: refused before reading them
    assert session.loaded() == {"classifier": demo_classifier}  # nothing lost
    session.unload("classifier")


def test_a_profile_too_small_for_the_models_in_memory_says_so(monkeypatch):
    from nemo_desktop.core.base import device

    session = ModelSession()
    monkeypatch.setattr(device, "gpu_info", lambda: [{"index": 0, "name": "a 24 GB card",
                                                      "total_bytes": int(23.6 * GIB), "free_bytes": 0}])
    with pytest.raises(ConfigError) as err:  # its 20B transformer alone: about 27 GiB in int8, offloaded
        session._check_profile_fits(PROFILES["24 GB"], "editor", "qwen-image-edit")
    assert "does not fit this GPU" in err.value.message and "qwen-image-edit" in err.value.message
    session._check_profile_fits(PROFILES["24 GB"], "editor", "instruct-pix2pix")  # fits: no error
    session._check_profile_fits(PROFILES["24 GB"], "editor", "flux-kontext-dev")  # int8, offloaded: fits


def test_advice_names_the_fitting_profile_and_why_the_chosen_one_cannot_fit(monkeypatch):
    models = {"mllm": get_entry("qwen2.5-vl-7b"), "editor": get_entry("flux-kontext-dev")}
    out = advice("80 GB", models, int(23.6 * GIB))
    assert out["fits"] == "24 GB" and "23.6 GiB" in out["why"] and out["chosen"] == "80 GB"
    assert out["problem"].startswith("The '80 GB' profile does not fit this GPU")
    out = advice(None, models, None)
    assert out["fits"] == "CPU" and out["why"] == "no CUDA GPU was found" and out["problem"] is None
    ok = advice("80 GB", models, int(79.2 * GIB))
    assert ok["problem"] is None and 0 < ok["estimate_gib"] < 79.2

    from nemo_desktop.core.base import device

    monkeypatch.setattr(device, "gpu_info", lambda: [])
    session = ModelSession()
    session.update_settings(lambda s: setattr(s.models, "mllm", "qwen2.5-vl-7b"))
    out = session.profile_advice("48 GB")  # the models a diagnosis would load: the defaults
    assert out["fits"] == "CPU" and "needs a CUDA GPU" in out["problem"]


def test_an_unknown_profile_in_the_settings_file_is_refused_in_words():
    from nemo_desktop.core.store.settings import MEMORY_PROFILES

    assert MEMORY_PROFILES == tuple(PROFILES)  # the settings know the profiles by name
    session = ModelSession()
    with pytest.raises(ConfigError, match="memory_profile' must be null or one of 80 GB, 48 GB, 24 GB, CPU"):
        _choose(session, "12 GB")
    assert session.settings().compute.memory_profile is None
    assert not Path(session.paths.settings_file).exists() or "12 GB" not in \
        Path(session.paths.settings_file).read_text()
