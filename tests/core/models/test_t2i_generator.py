"""The diffusers text-to-image generator family on tiny random pipelines saved and loaded back through the real
loader, with each shipped catalog entry's sampling settings planted (and its checkpoint's scheduler config), and
the model-difference condition source built on it."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("diffusers")

from nemo_desktop.core.base.errors import ConfigError, JobCancelled, ModelError
from nemo_desktop.core.models.catalog import get_entry
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

CPU = LoadOptions(device="cpu", dtype="float32")
SIZE = {"width": 32, "height": 32}  # the real 1024 px would take minutes on the CPU with no gain here


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from fixtures_tiny.t2i import build_tiny_flux_schnell, build_tiny_sd35

    root = tmp_path_factory.mktemp("t2i")
    return {"flux-schnell": build_tiny_flux_schnell(root), "sd3.5-medium": build_tiny_sd35(root)}


def _load(tiny, catalog_id, **extra):
    """The tiny pipeline with the catalog entry's own options (steps, guidance, ...) and a small size."""
    options = {**get_entry(catalog_id).options, **SIZE, **extra}
    return load_model(ModelSpec("generator", "diffusers-t2i", str(tiny[catalog_id]), options=options), CPU)


@pytest.mark.parametrize("catalog_id", ["flux-schnell", "sd3.5-medium"])
def test_loads_generates_deterministically_with_the_checkpoints_settings(tiny, catalog_id):
    gen = _load(tiny, catalog_id)
    expected = {"flux-schnell": ("FluxPipeline", 1.0, False), "sd3.5-medium": ("StableDiffusion3Pipeline", 3.0, None)}
    pipeline, shift, dynamic = expected[catalog_id]
    assert gen.info.extra["pipeline"] == pipeline and gen.info.revision.startswith("local-")
    scheduler = gen.pipe.scheduler.config
    assert scheduler.shift == shift and scheduler.get("use_dynamic_shifting", None) in (dynamic, False)
    settings = gen.info.extra["settings"]
    assert settings["steps"] == get_entry(catalog_id).options["steps"]
    assert settings["guidance"] == get_entry(catalog_id).options["guidance"]
    seen = []
    images = gen.generate("a photo of a woman with blond hair", n=2, seed=3, on_step=lambda i, n: seen.append(
        (i, n)) or True)
    assert len(images) == 2 and all(im.size == (32, 32) and im.mode == "RGB" for im in images)
    assert seen[-1] == (settings["steps"], settings["steps"])  # the entry's step count reached the sampler
    again = gen.generate("a photo of a woman with blond hair", n=2, seed=3)
    assert [im.tobytes() for im in images] == [im.tobytes() for im in again]
    other = gen.generate("a photo of a woman with blond hair", n=1, seed=4)
    assert other[0].tobytes() != images[0].tobytes()


def test_cancel_stops_inside_the_sampler(tiny):
    gen = _load(tiny, "sd3.5-medium")
    steps = []
    with pytest.raises(JobCancelled):
        gen.generate("a man", n=1, seed=0, on_step=lambda i, n: steps.append(i) or i < 2)
    assert steps == [1, 2]


def test_bad_options_and_folders_are_clear_errors(tiny, tmp_path):
    with pytest.raises(ConfigError, match="Unknown option"):
        load_model(ModelSpec("generator", "diffusers-t2i", str(tiny["flux-schnell"]), options={"stepz": 3}), CPU)
    (tmp_path / "model_index.json").write_text("{}")
    with pytest.raises(ModelError, match="Could not load the generator") as info:
        load_model(ModelSpec("generator", "diffusers-t2i", str(tmp_path)), CPU)
    assert "model_index.json" in info.value.hint
    editor = tiny["flux-schnell"].parent / "not-t2i"
    with pytest.raises(ConfigError, match="not a text-to-image pipeline"):
        from fixtures_tiny.editors import build_tiny_instruct_pix2pix

        load_model(ModelSpec("generator", "diffusers-t2i", str(build_tiny_instruct_pix2pix(editor))), CPU)


def test_text_to_image_conditions_feed_the_model_diff_meter(tiny, tmp_path):
    from nemo_desktop.core.analyses.model_diff.sources import open_condition_source
    from nemo_desktop.core.base.job_context import JobContext

    conditions = tmp_path / "conds.json"
    conditions.write_text(json.dumps({
        "name": "mine", "task_description": "classifying cats and dogs", "labels": ["cat", "dog"],
        "conditions": [{"text": "a cat in the snow", "label": "cat"}, {"text": "a dog on a beach", "label": "dog"}]}))
    source = open_condition_source(f"t2i:flux-schnell@{conditions}", lambda ref: _load(tiny, ref))
    assert source.space.class_labels() == ("cat", "dog") and len(source.space.all_conditions()) == 2
    assert source.info["settings"]["steps"] == 4 and source.info["pipeline"] == "FluxPipeline"
    cond = source.space.all_conditions()[1]
    pairs = source.sample(cond, 3, seed=0, ctx=JobContext())
    assert [label for _, label in pairs] == ["dog"] * 3
    again = source.sample(cond, 3, seed=0)
    assert [p[0].tobytes() for p in pairs] == [p[0].tobytes() for p in again]
    # The shipped gender captions are the default open conditions.
    default = open_condition_source("t2i:flux-schnell", lambda ref: _load(tiny, ref))
    assert default.space.class_labels() == ("man", "woman") and len(default.space.all_conditions()) == 100
    with pytest.raises(ConfigError, match="does not exist"):
        open_condition_source(f"t2i:flux-schnell@{tmp_path / 'none.json'}", lambda ref: _load(tiny, ref))
