"""Image editors: tiny random diffusers pipelines saved with save_pretrained and loaded through the registry."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from fixtures_tiny.editors import build_tiny_flux_kontext, build_tiny_instruct_pix2pix, build_tiny_qwen_image_edit
from nemo_desktop.core.base.errors import (ConfigError, JobCancelled, ModelError, OutOfMemoryError,
                                           WeightsNotFoundError)
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.models.protocols import ImageEditor
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, list_families, load_model

torch = pytest.importorskip("torch")

CPU = LoadOptions(device="cpu")
FAST = ["diffusers-instruct-pix2pix", "diffusers-flux-kontext"]
BUILDERS = {"diffusers-instruct-pix2pix": build_tiny_instruct_pix2pix,
            "diffusers-flux-kontext": build_tiny_flux_kontext,
            "diffusers-qwen-image-edit": build_tiny_qwen_image_edit}


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    """Saved tiny pipelines, built lazily once per session."""
    root = tmp_path_factory.mktemp("tiny-editors")
    built: dict[str, object] = {}

    def get(family: str, **kw):
        key = family + repr(sorted(kw.items()))
        if key not in built:
            built[key] = BUILDERS[family](root, **kw)
        return built[key]

    return get


@pytest.fixture(scope="session")
def editors(tiny_dirs):
    loaded: dict[str, object] = {}

    def get(family: str):
        if family not in loaded:
            loaded[family] = load_model(ModelSpec("editor", family, str(tiny_dirs(family))), CPU)
        return loaded[family]

    return get


def _image(w=50, h=37, seed=0):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8))


def _decoded_sizes(editor, monkeypatch):
    """Spy on the VAE decoder: the pixel size each call decodes (proves the working resolution)."""
    sizes = []
    vae = editor.pipe.vae
    real = vae.decode
    factor = editor.pipe.vae_scale_factor

    def decode(z, *a, **k):
        sizes.append((z.shape[-1] * factor, z.shape[-2] * factor))
        return real(z, *a, **k)

    monkeypatch.setattr(vae, "decode", decode)
    return sizes


def _encoded_images(editor, monkeypatch):
    """Spy on the VAE encoder: every image it encodes (one row per batch element), as float arrays."""
    rows = []
    vae = editor.pipe.vae
    real = vae.encode

    def encode(x, *a, **k):
        rows.extend(r.detach().float().cpu().numpy() for r in x)
        return real(x, *a, **k)

    monkeypatch.setattr(vae, "encode", encode)
    return rows


def test_every_editor_family_is_registered():
    assert {f for _, f in list_families("editor")} >= set(BUILDERS)


@pytest.mark.parametrize("family", FAST + [pytest.param("diffusers-qwen-image-edit", marks=pytest.mark.slow)])
def test_edit_returns_requested_size_with_one_callback_per_step(family, editors, monkeypatch):
    editor = editors(family)
    assert isinstance(editor, ImageEditor)
    assert editor.info.family == family and editor.info.revision.startswith("local-")
    decoded = _decoded_sizes(editor, monkeypatch)
    calls = []
    out = editor.edit(_image(), "make the dog a cat", seed=3, steps=3, size=(50, 37),
                      on_step=lambda i, n: calls.append((i, n)) or True)
    assert out.size == (50, 37) and out.mode == "RGB"
    assert calls == [(1, 3), (2, 3), (3, 3)]
    # The pipeline ran at the requested size rounded to its multiple, not at a megapixel.
    assert decoded == [editor.working_size(50, 37)]
    m = editor.size_multiple
    assert m == (8 if family.endswith("pix2pix") else 16)
    w, h = editor.working_size(50, 37)
    assert w % m == 0 and h % m == 0 and abs(w - 50) <= m / 2 and abs(h - 37) <= m / 2


@pytest.mark.parametrize("family", FAST)
def test_default_size_is_the_input_size(family, editors):
    assert editors(family).edit(_image(40, 24), "add a hat", steps=1).size == (40, 24)


@pytest.mark.parametrize("family", FAST)
def test_same_seed_same_image_other_seed_other_image(family, editors):
    editor = editors(family)
    a = np.asarray(editor.edit(_image(), "add a hat", seed=7, steps=2, size=(48, 32)), dtype=float)
    b = np.asarray(editor.edit(_image(), "add a hat", seed=7, steps=2, size=(48, 32)), dtype=float)
    c = np.asarray(editor.edit(_image(), "add a hat", seed=8, steps=2, size=(48, 32)), dtype=float)
    assert np.abs(a - b).max() <= 2  # float noise of a few 1e-4 may flip one uint8 step
    assert np.abs(a - c).mean() > 1


@pytest.mark.parametrize("family", FAST)
def test_cancel_in_step_callback_stops_the_loop_and_editor_stays_usable(family, editors, monkeypatch):
    editor = editors(family)
    decoded = _decoded_sizes(editor, monkeypatch)
    ctx = JobContext()
    calls = []

    def on_step(i, n):
        calls.append(i)
        if i == 2:
            ctx.cancel_token.cancel()
        return not ctx.cancelled

    with pytest.raises(JobCancelled):
        editor.edit(_image(), "add a hat", steps=5, size=(32, 32), on_step=on_step)
    assert calls == [1, 2] and decoded == []  # stopped after step 2, nothing decoded
    assert editor.edit(_image(), "add a hat", steps=1, size=(32, 32)).size == (32, 32)


def test_job_context_step_callback_drives_an_edit(editors):
    editor = editors("diffusers-flux-kontext")
    seen = []
    ctx = JobContext(on_progress=seen.append)
    report = ctx.step_callback("Editing image 1 of 1", 2)
    editor.edit(_image(), "add a hat", steps=2, size=(32, 32), on_step=lambda i, n: report(i))
    assert [(p.stage, p.done, p.total) for p in seen] == [("Editing image 1 of 1", 1, 2), ("Editing image 1 of 1", 2, 2)]


def test_out_of_memory_during_edit_becomes_a_clear_error(editors, monkeypatch):
    editor = editors("diffusers-flux-kontext")

    def oom(*a, **k):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with monkeypatch.context() as m:
        m.setattr(editor.pipe.transformer, "forward", oom)
        with pytest.raises(OutOfMemoryError) as err:
            editor.edit(_image(), "add a hat", steps=2, size=(32, 32))
    assert "resolution" in err.value.hint and "offload" in err.value.hint
    assert editor.edit(_image(), "add a hat", steps=1, size=(32, 32)).size == (32, 32)


def test_loading_a_folder_with_the_wrong_family_says_what_it_holds(tiny_dirs):
    with pytest.raises(ConfigError, match="StableDiffusionInstructPix2PixPipeline"):
        load_model(ModelSpec("editor", "diffusers-flux-kontext", str(tiny_dirs("diffusers-instruct-pix2pix"))), CPU)


def test_loads_from_the_hub_cache_and_pins_the_commit(tiny_dirs, tmp_path):
    """A repo id resolves to the cached snapshot (HF_HUB_OFFLINE=1 is set for the whole suite)."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--tiny-org--kontext"
    shutil.copytree(tiny_dirs("diffusers-flux-kontext"), repo / "snapshots" / sha)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    options = LoadOptions(device="cpu", cache_dir=str(tmp_path / "hub"))
    editor = load_model(ModelSpec("editor", "diffusers-flux-kontext", "tiny-org/kontext"), options)
    assert editor.info.revision == sha
    assert editor.edit(_image(), "add a hat", steps=1, size=(24, 24)).size == (24, 24)


def test_hub_repo_not_in_cache_offline_is_weights_not_found(tmp_path):
    options = LoadOptions(device="cpu", cache_dir=str(tmp_path / "empty-hub"))
    spec = ModelSpec("editor", "diffusers-flux-kontext", "black-forest-labs/FLUX.1-Kontext-dev",
                     catalog_id="flux-kontext-dev")
    with pytest.raises(WeightsNotFoundError) as err:
        load_model(spec, options)
    assert "nemo models download flux-kontext-dev" in err.value.hint


def test_unload_releases_the_pipeline(tiny_dirs):
    editor = load_model(ModelSpec("editor", "diffusers-instruct-pix2pix", str(tiny_dirs("diffusers-instruct-pix2pix"))),
                        CPU)
    editor.unload()
    assert editor.pipe is None
    with pytest.raises(ModelError, match="unloaded"):
        editor.edit(_image(), "add a hat", steps=1)


@pytest.mark.slow
def test_qwen_image_edit_plus_pipeline_loads_in_the_same_family(tiny_dirs):
    editor = load_model(ModelSpec("editor", "diffusers-qwen-image-edit",
                                  str(tiny_dirs("diffusers-qwen-image-edit", plus=True))), CPU)
    assert editor.info.extra["pipeline"] == "QwenImageEditPlusPipeline"
    assert editor.steps_for_pipeline() == 40 and editor.size_multiple == 16


# -- the preferred working resolution (computed, never run here: a megapixel edit takes minutes on a CPU) --------
def test_preferred_working_size_is_a_pure_function():
    from nemo_desktop.core.models.adapters.diffusers_editor import preferred_working_size

    # FluxKontextPipeline's own max_area rule (diffusers): sides rounded, then floored to multiples of 16.
    assert preferred_working_size(1024, 1024, area=1024 ** 2, multiple=16, rounding="floor") == (1024, 1024)
    assert preferred_working_size(500, 375, area=1024 ** 2, multiple=16, rounding="floor") == (1168, 880)
    # Qwen-Image-Edit's calculate_dimensions(1024*1024, ratio): nearest multiple of 32.
    assert preferred_working_size(500, 375, area=1024 ** 2, multiple=32, rounding="nearest") == (1184, 896)
    # InstructPix2Pix at 512 x 512's area, multiple 8: a small ImageNet-R image is enlarged, a photo shrunk.
    assert preferred_working_size(64, 64, area=512 ** 2, multiple=8) == (512, 512)
    assert preferred_working_size(4000, 3000, area=512 ** 2, multiple=8) == (592, 440)
    for w, h in [(37, 50), (300, 100), (1920, 1080)]:
        pw, ph = preferred_working_size(w, h, area=1024 ** 2, multiple=16, rounding="floor")
        assert pw % 16 == 0 and ph % 16 == 0
        assert abs(pw / ph - w / h) / (w / h) < 0.05  # aspect ratio kept
        assert 0.9 < pw * ph / 1024 ** 2 <= 1.0
    assert preferred_working_size(10000, 1, area=512 ** 2, multiple=8)[1] == 8  # at least one multiple
    with pytest.raises(ValueError):
        preferred_working_size(0, 10, area=512 ** 2, multiple=8)


@pytest.mark.parametrize("family, expected", [("diffusers-instruct-pix2pix", (592, 440)),
                                              ("diffusers-flux-kontext", (1168, 880))])
def test_each_family_states_its_preferred_size(family, expected, editors):
    """The loaded (tiny) pipelines: only the arithmetic is exercised, no megapixel denoising."""
    assert editors(family).preferred_size(500, 375) == expected


def test_qwen_image_edit_preferred_size_uses_multiples_of_32():
    from nemo_desktop.core.models.adapters.diffusers_editor import QwenImageEditEditor

    class _Pipe:  # the one attribute preferred_size may read; no pipeline is built or run
        vae_scale_factor = 8

    editor = object.__new__(QwenImageEditEditor)
    editor.pipe = _Pipe()
    assert editor.preferred_size(500, 375) == (1184, 896)


@pytest.mark.parametrize("family", FAST)
def test_edit_batch_equals_one_edit_per_instruction(family, editors):
    """Several instructions in one pipeline call: each result is what `edit` gives for it alone (same seed,
    same starting noise), up to batched float noise."""
    editor = editors(family)
    instructions = ["add a hat", "make the dog a cat", "turn the background into snow"]
    steps = []
    batch = editor.edit_batch(_image(), instructions, seed=5, steps=2, size=(48, 32),
                              on_step=lambda i, n: steps.append(i) or True)
    assert len(batch) == 3 and all(im.size == (48, 32) for im in batch) and steps == [1, 2]
    for instruction, got in zip(instructions, batch):
        alone = np.asarray(editor.edit(_image(), instruction, seed=5, steps=2, size=(48, 32)), dtype=float)
        assert np.abs(np.asarray(got, dtype=float) - alone).max() <= 3
    assert np.abs(np.asarray(batch[0], float) - np.asarray(batch[1], float)).mean() > 0.5
    assert editor.edit_batch(_image(), [], seed=5) == []


@pytest.mark.parametrize("family", FAST + [pytest.param("diffusers-qwen-image-edit", marks=pytest.mark.slow)])
def test_edit_images_equals_one_edit_per_image(family, editors, monkeypatch):
    """One instruction on several images (of different sizes) in one pipeline call: each result is what `edit`
    gives for that image alone at the same size and seed, up to batched float noise."""
    editor = editors(family)
    images = [_image(50, 37, seed=1), _image(40, 30, seed=2), _image(64, 20, seed=3)]
    decoded, encoded, steps = _decoded_sizes(editor, monkeypatch), _encoded_images(editor, monkeypatch), []
    batch = editor.edit_images(images, "add a hat", seed=5, steps=2, size=(48, 32),
                               on_step=lambda i, n: steps.append(i) or True)
    assert steps == [1, 2] and len(decoded) == 1  # one denoising loop, one decode of the whole batch
    assert len(batch) == 3 and all(im.size == (48, 32) and im.mode == "RGB" for im in batch)
    batch_inputs = list(encoded)
    for i, (image, got) in enumerate(zip(images, batch)):
        encoded.clear()
        alone = np.asarray(editor.edit(image, "add a hat", seed=5, steps=2, size=(48, 32)), dtype=float)
        assert np.abs(np.asarray(got, dtype=float) - alone).max() <= 3
        # batch element i was conditioned on image i, resized as `edit` resizes it
        assert len(encoded) == 1 and np.abs(batch_inputs[i] - encoded[0]).max() < 1e-5
    assert np.abs(batch_inputs[0] - batch_inputs[1]).mean() > 0.05
    assert editor.edit_images([], "add a hat", seed=5) == []


def test_counterfactual_tester_edit_many_batches_a_real_editor(editors, monkeypatch):
    """methods/intervention.py's edit_many on a loaded editor: the two images of one working size in one
    pipeline call, the third alone; each result is edit_one's, up to batched float noise."""
    from nemo_desktop.core.methods.intervention import (CounterfactualTester, InterventionSettings, UnitCache,
                                                        image_hash)

    editor = editors("diffusers-instruct-pix2pix")
    settings = InterventionSettings(seed=4, edit_steps=2, edit_resolution="native", edit_batch_size=3)
    tester = CounterfactualTester(None, None, editor, settings=settings)
    images = [_image(40, 24, seed=1), _image(32, 32, seed=2), _image(40, 24, seed=3)]
    decoded = _decoded_sizes(editor, monkeypatch)
    out = tester.edit_many(JobContext(), UnitCache(None), [(im, image_hash(im)) for im in images], "add a hat", "s")
    assert sorted(decoded) == [(32, 32), (40, 24)]  # two pipeline calls for three images
    for image, got in zip(images, out):
        alone = tester.edit_one(JobContext(), UnitCache(None), image, image_hash(image), "add a hat", "s")
        assert got.size == image.size
        assert np.abs(np.asarray(got, dtype=float) - np.asarray(alone, dtype=float)).max() <= 3


def test_edit_images_of_different_sizes_need_an_output_size(editors):
    editor = editors("diffusers-instruct-pix2pix")
    with pytest.raises(ConfigError, match="different sizes"):
        editor.edit_images([_image(40, 24), _image(32, 32)], "add a hat", steps=1)
    same = editor.edit_images([_image(40, 24, seed=1), _image(40, 24, seed=2)], "add a hat", steps=1)
    assert [im.size for im in same] == [(40, 24), (40, 24)]  # default: the images' own size


def test_edit_images_cancel_stops_the_batch(editors):
    editor = editors("diffusers-flux-kontext")
    with pytest.raises(JobCancelled):
        editor.edit_images([_image(seed=1), _image(seed=2)], "add a hat", steps=3, size=(32, 32),
                           on_step=lambda i, n: i < 2)
    assert len(editor.edit_images([_image(seed=1)], "add a hat", steps=1, size=(32, 32))) == 1


@pytest.mark.slow
def test_qwen_image_edit_plus_edits_images_one_call_each(tiny_dirs):
    """QwenImageEditPlusPipeline reads a list of images as the conditions of one edit, so its images are
    edited one pipeline call each, with the single edit's results."""
    editor = load_model(ModelSpec("editor", "diffusers-qwen-image-edit",
                                  str(tiny_dirs("diffusers-qwen-image-edit", plus=True))), CPU)
    assert not editor.batches_images
    images = [_image(seed=1), _image(seed=2)]
    steps = []
    batch = editor.edit_images(images, "add a hat", seed=5, steps=2, size=(32, 32),
                               on_step=lambda i, n: steps.append(i) or True)
    assert steps == [1, 2, 1, 2]  # two denoising loops
    for image, got in zip(images, batch):
        alone = np.asarray(editor.edit(image, "add a hat", seed=5, steps=2, size=(32, 32)), dtype=float)
        assert np.abs(np.asarray(got, dtype=float) - alone).max() <= 3


def test_attention_backend_option_changes_only_the_kernel(tiny_dirs, editors):
    folder = str(tiny_dirs("diffusers-flux-kontext"))
    native = load_model(ModelSpec("editor", "diffusers-flux-kontext", folder,
                                  options={"attention_backend": "_native_math"}), CPU)
    a = np.asarray(native.edit(_image(), "add a hat", seed=2, steps=2, size=(48, 32)), dtype=float)
    b = np.asarray(editors("diffusers-flux-kontext").edit(_image(), "add a hat", seed=2, steps=2, size=(48, 32)),
                   dtype=float)
    assert np.abs(a - b).max() <= 2
    with pytest.raises(ConfigError, match="attention backend"):
        load_model(ModelSpec("editor", "diffusers-flux-kontext", folder, options={"attention_backend": "warp"}), CPU)
