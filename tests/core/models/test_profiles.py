"""Memory profiles (issue 40): the profile chooser against stated card sizes, the fit check in words."""
from __future__ import annotations

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.models.catalog import get_entry
from dataclasses import replace

from nemo_desktop.core.models.profiles import (GIB, PROFILES, check_fits, estimate, fitting_profile,
                                               get_profile)

# What torch.cuda.mem_get_info reports as total for common cards (GiB), and the profile each should get.
CARDS = [
    ("H200 141 GB", 139.8, "80 GB"), ("H100 80 GB", 79.2, "80 GB"), ("A100 80 GB", 79.1, "80 GB"),
    ("L40S / A6000 48 GB", 44.4, "48 GB"), ("A100 40 GB", 39.4, "24 GB"), ("RTX 4090 24 GB", 23.6, "24 GB"),
    ("RTX A5000 24 GB", 23.7, "24 GB"), ("RTX 4080 16 GB", 15.6, "CPU"), ("no GPU", 0, "CPU"),
]


@pytest.mark.parametrize("card, gib, expected", CARDS)
def test_the_profile_that_fits_a_card(card, gib, expected):
    profile, why = fitting_profile(int(gib * GIB) if gib else None)
    assert profile.name == expected, card
    assert why  # says why, in words
    if expected == "CPU" and gib:
        assert "less than the smallest GPU profile" in why


def test_profile_names_are_forgiving_and_unknown_ones_are_refused():
    assert get_profile("24gb") is PROFILES["24 GB"] and get_profile("cpu") is PROFILES["CPU"]
    with pytest.raises(ConfigError, match="Unknown memory profile"):
        get_profile("12 GB")


def _paper_models():
    return {"classifier": get_entry("vit-b16-augreg2"), "mllm": get_entry("qwen2.5-vl-7b"),
            "editor": get_entry("flux-kontext-dev")}


def test_quantisation_and_offload_shrink_the_estimate():
    models = _paper_models()
    peaks = {name: estimate(PROFILES[name], models).peak_gib for name in ("80 GB", "48 GB", "24 GB")}
    assert peaks["80 GB"] > peaks["48 GB"] > peaks["24 GB"]
    mllm = {p.role: p for p in estimate(PROFILES["48 GB"], models).parts}["mllm"]
    assert mllm.how == "int8 weights"


def test_a_profile_that_cannot_fit_says_so_before_loading():
    models = _paper_models()
    assert check_fits(PROFILES["80 GB"], models, int(79.2 * GIB)).peak_gib < 79.2
    assert check_fits(PROFILES["48 GB"], models, int(47.5 * GIB)).peak_gib < 47.5
    # The paper's models do not fit 24 GiB even with the editor in int8 and offloaded (0.9 + 11.9 + 13.5 GiB):
    # the check says so with the numbers and what to do, before any weights are read.
    with pytest.raises(ConfigError) as err:
        check_fits(PROFILES["24 GB"], models, int(23.6 * GIB))
    assert "does not fit this GPU" in err.value.message and "flux-kontext-dev" in err.value.message
    assert "23.6 GiB" in err.value.message and "Choose a smaller profile" in err.value.hint
    small = {**models, "mllm": get_entry("qwen2.5-vl-3b"), "editor": get_entry("instruct-pix2pix")}
    check_fits(PROFILES["24 GB"], small, int(23.6 * GIB))
    with pytest.raises(ConfigError, match="needs a CUDA GPU"):
        check_fits(PROFILES["24 GB"], small, None)
    check_fits(PROFILES["CPU"], models, None)  # the CPU profile has no GPU budget to exceed


def test_profiles_set_the_mllm_options_and_offload():
    assert PROFILES["48 GB"].spec_options("mllm", "transformers-mllm") == {"batch_size": 8, "quantize": "int8"}
    assert PROFILES["80 GB"].spec_options("mllm", "openai-compatible") == {}  # a server manages its own memory
    assert PROFILES["24 GB"].load_settings("editor") == {"device": "auto", "cpu_offload": True}
    assert PROFILES["CPU"].load_settings("mllm") == {"device": "cpu"}


def test_the_24_gb_profile_quantises_a_dit_editor_and_its_estimate_says_so():
    profile = PROFILES["24 GB"]
    assert profile.spec_options("editor", "diffusers-flux-kontext") == {"quantize": "int8"}
    assert profile.spec_options("editor", "diffusers-instruct-pix2pix") == {}  # a UNet: nothing to quantise
    assert PROFILES["48 GB"].spec_options("editor", "diffusers-flux-kontext") == {}
    models = {"classifier": get_entry("vit-b16-augreg2"), "mllm": get_entry("qwen2.5-vl-3b"),
              "editor": get_entry("flux-kontext-dev")}
    editor = {p.role: p for p in estimate(profile, models).parts}["editor"]
    bf16 = {p.role: p for p in estimate(replace(profile, editor_quantize=None), models).parts}["editor"]
    assert editor.how == "int8 weights, offloaded, largest component"
    # int8 halves the transformer and T5 (99% of FLUX.1 Kontext's weights); the working memory stays.
    assert 0.5 < editor.gib / bf16.gib < 0.6
    # FLUX.1 Kontext with the 3B MLLM fits a 24 GB card now (bf16 offloaded: about 32 GiB, refused).
    assert check_fits(profile, models, int(23.6 * GIB)).peak_gib < 23.6
    with pytest.raises(ConfigError, match="does not fit this GPU"):
        check_fits(replace(profile, editor_quantize=None), models, int(23.6 * GIB))


def test_the_mllm_estimate_keeps_its_unquantised_parts_in_bf16():
    """Only the language model's linear layers are quantised (about 75%): the rest stays at 2 bytes/param."""
    entry = get_entry("qwen2.5-vl-7b")
    mllm = {p.role: p for p in estimate(PROFILES["48 GB"], {"mllm": entry}).parts}["mllm"]
    working = entry.vram_bf16_gb * 1e9 - entry.parameters * 2
    assert mllm.gib * GIB == pytest.approx(entry.parameters * (0.75 + 0.25 * 2) + working)
