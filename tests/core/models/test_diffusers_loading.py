"""The diffusers loader shared by editors and text-to-image generators (core/models/adapters/diffusers_loading.py):
the same checkpoint folder gets the same treatment from both families: safetensors only, the family's pipeline
classes only, the loading settings in ModelInfo.extra."""
from __future__ import annotations

import pytest

from fixtures_tiny.editors import build_tiny_instruct_pix2pix
from nemo_desktop.core.base.errors import ConfigError, ModelError
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

pytest.importorskip("diffusers")
CPU = LoadOptions(device="cpu")


@pytest.fixture(scope="module")
def pix2pix(tmp_path_factory):
    """A real InstructPix2Pix folder (safetensors) and the same pipeline with its UNet and VAE saved as pickle (.bin)
    weights (transformers 5 writes the text encoder as safetensors whatever it is asked)."""
    from diffusers import DiffusionPipeline

    root = tmp_path_factory.mktemp("diffusers-loading")
    safe = build_tiny_instruct_pix2pix(root / "safe")
    pickled = root / "pickled"
    DiffusionPipeline.from_pretrained(safe).save_pretrained(pickled, safe_serialization=False)
    assert list((pickled / "unet").glob("*.bin")) and not list((pickled / "unet").glob("*.safetensors"))
    return safe, pickled


def test_editor_records_how_it_was_loaded(pix2pix):
    safe, _ = pix2pix
    editor = load_model(ModelSpec("editor", "diffusers-instruct-pix2pix", str(safe)), CPU)
    extra = editor.info.extra
    assert (extra["pipeline"], extra["device"], extra["dtype"], extra["offload"]) == \
        ("StableDiffusionInstructPix2PixPipeline", "cpu", "float32", None)
    assert editor.info.revision.startswith("local-")  # the folder's fingerprint pins a local checkpoint
    editor.unload()


@pytest.mark.parametrize("kind, family, role", [("editor", "diffusers-instruct-pix2pix", "editor"),
                                                ("generator", "diffusers-t2i", "generator")])
def test_pickle_weights_are_refused_by_both_families(pix2pix, kind, family, role):
    _, pickled = pix2pix
    with pytest.raises(ModelError, match=f"Could not load the {role}") as info:
        load_model(ModelSpec(kind, family, str(pickled)), CPU)
    assert "safetensors" in info.value.hint


def test_an_unknown_offload_mode_is_a_clear_error(pix2pix):
    safe, _ = pix2pix
    with pytest.raises(ConfigError, match="Unknown offload mode"):
        load_model(ModelSpec("editor", "diffusers-instruct-pix2pix", str(safe), options={"offload": "disk"}), CPU)
