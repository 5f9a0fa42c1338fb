"""The editor's speed options (issue 40, item 3): `quantize` (torchao int8 weights for a DiT editor's
transformer and T5) and FLUX.1 Kontext's prompt embeddings computed once per instruction."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from fixtures_tiny.editors import build_tiny_flux_kontext, build_tiny_instruct_pix2pix
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.methods.intervention import model_part
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

CPU = LoadOptions(device="cpu")
FAMILY = "diffusers-flux-kontext"


@pytest.fixture(scope="module")
def kontext_dir(tmp_path_factory):
    return str(build_tiny_flux_kontext(tmp_path_factory.mktemp("kontext")))


def _image():
    return Image.fromarray(np.random.default_rng(0).integers(0, 255, (37, 50, 3), dtype=np.uint8))


def _linear_weight_types(module):
    return {type(m.weight).__name__ for m in module.modules() if isinstance(m, torch.nn.Linear)}


def test_int8_quantises_transformer_and_t5_and_still_edits(kontext_dir):
    plain = load_model(ModelSpec("editor", FAMILY, kontext_dir), CPU)
    int8 = load_model(ModelSpec("editor", FAMILY, kontext_dir, options={"quantize": "int8"}), CPU)
    assert _linear_weight_types(int8.pipe.transformer) == {"Int8Tensor"}
    assert _linear_weight_types(int8.pipe.text_encoder_2) == {"Int8Tensor"}  # T5
    assert _linear_weight_types(int8.pipe.text_encoder) == {"Parameter"}  # CLIP stays in the load dtype
    assert _linear_weight_types(plain.pipe.transformer) == {"Parameter"}
    a = int8.edit(_image(), "add a hat", seed=2, steps=2, size=(48, 32))
    b = plain.edit(_image(), "add a hat", seed=2, steps=2, size=(48, 32))
    assert a.size == (48, 32)
    diff = np.abs(np.asarray(a, float) - np.asarray(b, float))
    # An edit, not noise: int8 weights move pixels a little, not the whole picture.
    assert diff.mean() < 5


def test_quantize_is_part_of_the_model_id_and_the_result_key(kontext_dir):
    plain = load_model(ModelSpec("editor", FAMILY, kontext_dir), CPU)
    int8 = load_model(ModelSpec("editor", FAMILY, kontext_dir, options={"quantize": "int8"}), CPU)
    assert int8.info.model_id == f"{plain.info.model_id}[int8]"
    assert model_part(int8.info) != model_part(plain.info)


def test_float8_on_the_cpu_and_unknown_kinds_are_refused_in_words(kontext_dir):
    with pytest.raises(ConfigError, match="float8 editor weights need a CUDA GPU") as err:
        load_model(ModelSpec("editor", FAMILY, kontext_dir, options={"quantize": "float8"}), CPU)
    assert "int8" in err.value.hint
    with pytest.raises(ConfigError, match="Unknown quantize option 'int3'"):
        load_model(ModelSpec("editor", FAMILY, kontext_dir, options={"quantize": "int3"}), CPU)


def test_a_unet_editor_has_nothing_to_quantise_and_says_so(tmp_path):
    folder = str(build_tiny_instruct_pix2pix(tmp_path))
    with pytest.raises(ConfigError, match="no transformer or T5 text encoder"):
        load_model(ModelSpec("editor", "diffusers-instruct-pix2pix", folder, options={"quantize": "int8"}), CPU)


def test_prompt_embeddings_are_computed_once_per_instruction_and_change_nothing(kontext_dir, monkeypatch):
    editor = load_model(ModelSpec("editor", FAMILY, kontext_dir), CPU)
    source = _image().resize((48, 32))
    # The pipeline encoding the prompt itself (no cached embeddings): the reference image.
    kwargs = editor.call_kwargs(source, "add a hat", 48, 32, 2, editor.default_guidance)
    with torch.inference_mode():
        reference = editor.pipe(**kwargs, generator=torch.Generator().manual_seed(3), output_type="pil").images[0]
    calls = []
    t5 = editor.pipe.text_encoder_2
    original = t5.forward
    monkeypatch.setattr(t5, "forward", lambda *a, **k: calls.append(1) or original(*a, **k))
    first = editor.edit(source, "add a hat", seed=3, steps=2, size=(48, 32))
    again = editor.edit(source, "add a hat", seed=3, steps=2, size=(48, 32))
    assert np.array_equal(np.asarray(first), np.asarray(reference)) and np.array_equal(np.asarray(again),
                                                                                       np.asarray(reference))
    assert len(calls) == 1  # T5 ran for the first edit only
    batch = editor.edit_batch(source, ["add a hat", "make it red"], seed=3, steps=2, size=(48, 32))
    assert len(calls) == 2  # only the new instruction was encoded
    assert np.abs(np.asarray(batch[0], float) - np.asarray(reference, float)).max() <= 3
    editor.unload()
    assert not editor._prompt_cache
