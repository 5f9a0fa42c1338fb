"""Issue 29, targeted data source (b): a failure mode's sentence rendered by a text-to-image model of the catalog
(a tiny random FLUX.1 [schnell] pipeline saved and loaded back through the real diffusers loader), labelled with
the affected class, recorded as a data source with its count, stored so that a resumed fix renders nothing
twice; from the registry entry and from `nemo fix --sentence --generator`."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("diffusers")

from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm  # noqa: E402
from nemo_desktop.core.analyses.fix import FixConfig  # noqa: E402
from nemo_desktop.core.analyses.fix.rendering import rendered_data  # noqa: E402
from nemo_desktop.core.base.errors import ConfigError  # noqa: E402
from nemo_desktop.core.base.job_context import JobContext  # noqa: E402
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model  # noqa: E402
from nemo_desktop.core.registry import Components, build_analysis  # noqa: E402

CPU = LoadOptions(device="cpu", dtype="float32")
T2I_OPTIONS = {"steps": 2, "guidance": 0.0, "max_sequence_length": 32, "width": 32, "height": 32}
SENTENCE = "a photo of a {class} on a red carpet"


@pytest.fixture(scope="module")
def t2i_folder(tmp_path_factory):
    from fixtures_tiny.t2i import build_tiny_flux_schnell

    return build_tiny_flux_schnell(tmp_path_factory.mktemp("fix-t2i"))


@pytest.fixture
def generator(t2i_folder):
    """The tiny pipeline through the real loader, counting the prompts it is asked to render."""
    gen = load_model(ModelSpec("generator", "diffusers-t2i", str(t2i_folder), options=T2I_OPTIONS), CPU)
    gen.prompts = []
    real = gen.generate

    def generate(prompt, **kw):
        gen.prompts.append(prompt)
        return real(prompt, **kw)

    gen.generate = generate
    return gen


@pytest.fixture
def timm_folder(tmp_path):
    return build_tiny_timm(tmp_path / "tiny", label_names=TINY_CLASSES, input_size=32)


def _images(n, seed):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), "RGB") for _ in range(n)]


def _data():
    from nemo_desktop.core.analyses.fix import FixData

    def items(n, seed):
        return [(im, i % 2) for i, im in enumerate(_images(n, seed))]

    return FixData(list(TINY_CLASSES), train=items(12, 1), affected=items(6, 2), rest=items(6, 3))


def test_the_sentence_is_rendered_per_affected_class_labelled_and_stored(generator, store):
    config = FixConfig(sentence=SENTENCE, affected_classes="cat,dog", per_class=3, seed=2)
    extra, sources = rendered_data(list(TINY_CLASSES), config, generator, store, JobContext())
    assert generator.prompts == ["a photo of a cat on a red carpet", "a photo of a dog on a red carpet"]
    assert [y for _, y in extra] == [0, 0, 0, 1, 1, 1]  # the affected classes' labels
    assert all(im.size == (32, 32) and im.mode == "RGB" for im, _ in extra)
    assert [(s["source"], s["class"], s["count"], s["prompt"]) for s in sources] == [
        ("text-to-image", "cat", 3, "a photo of a cat on a red carpet"),
        ("text-to-image", "dog", 3, "a photo of a dog on a red carpet")]
    assert sources[0]["sentence"] == SENTENCE and sources[0]["generator"]["settings"]["steps"] == 2
    again, _ = rendered_data(list(TINY_CLASSES), config, generator, store, JobContext())
    assert len(generator.prompts) == 2  # a resumed fix renders nothing twice
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for (a, _), (b, _) in zip(extra, again))


def test_a_sentence_needs_its_class_and_a_text_to_image_model(generator, timm_folder):
    with pytest.raises(ConfigError, match="names no class"):
        rendered_data(list(TINY_CLASSES), FixConfig(sentence="a red carpet", affected_classes="cat,dog"),
                      generator, None, JobContext())
    with pytest.raises(ConfigError, match="affected class"):
        FixConfig(sentence="a red carpet").check_plan()
    from nemo_desktop.core.analyses.model_diff.sources import open_condition_source

    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{timm_folder}"), CPU)
    options = {"sentence": "a cat on a red carpet", "affected_classes": "cat"}
    for wrong in (None, open_condition_source("digits")):  # none, or a condition source that renders no text
        with pytest.raises(ConfigError, match="text-to-image model"):
            build_analysis("fix", Components(classifier=clf, generator=wrong), options)


def test_a_fix_from_a_failure_mode_sentence_records_the_rendered_source(generator, timm_folder, store):
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{timm_folder}"), CPU)
    options = {"sentence": SENTENCE, "affected_classes": "cat", "per_class": 4, "epochs": 1, "bootstrap": 100,
               "save": False}
    result = build_analysis("fix", Components(classifier=clf, generator=generator, store=store), options)(
        _data(), JobContext())
    assert result.data["targeted"] == 4 and generator.prompts == ["a photo of a cat on a red carpet"]
    (source,) = result.sources
    assert source["source"] == "text-to-image" and source["count"] == 4 and source["class"] == "cat"
    assert result.manifest["generator"]["id"] == generator.info.model_id
    assert result.training["n_train"] + result.training["n_val"] == 12 + 4
    without = build_analysis("fix", Components(classifier=clf, store=store),
                             {**options, "sentence": "", "data": "augment"})
    assert without.key(_data()) != build_analysis("fix", Components(classifier=clf, generator=generator),
                                                  options).key(_data())


def test_nemo_fix_renders_a_sentence_with_a_catalog_generator(t2i_folder, timm_folder, tmp_path, capsys):
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.models.catalog import user_catalog_path

    user_catalog_path().parent.mkdir(parents=True, exist_ok=True)
    user_catalog_path().write_text(json.dumps({"entries": [{
        "id": "my-t2i", "kind": "generator", "family": "diffusers-t2i", "repo": str(t2i_folder),
        "source": str(t2i_folder), "revision": "main", "license": "apache-2.0", "gated": False,
        "disk_size_bytes": 1000, "vram_bf16_gb": 0.1, "recommended_gpu": "any", "description": "tiny",
        "options": T2I_OPTIONS}]}))
    data = tmp_path / "fixdata"
    for split, n in (("train", 6), ("affected", 4), ("rest", 4)):
        for c, cls in enumerate(("cat", "dog")):
            (data / split / cls).mkdir(parents=True)
            for i, im in enumerate(_images(n, seed=10 * c + len(split))):
                im.save(data / split / cls / f"{i}.png")
    assert main(["fix", str(data), "--classifier", f"timm:local-dir:{timm_folder}", "--sentence",
                 "a cat on a red carpet", "--generator", "my-t2i", "--affected-classes", "cat", "--per-class", "3",
                 "--epochs", "1", "--bootstrap", "100", "--save", "false", "--device", "cpu", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(s["source"], s["class"], s["count"], s["generator"]["id"]) for s in out["sources"]] == [
        ("text-to-image", "cat", 3, "my-t2i")]
    assert out["data"]["targeted"] == 3 and out["config"]["sentence"] == "a cat on a red carpet"


def test_the_app_offers_only_text_to_image_models_to_render_a_sentence():
    """A fix's generator renders the failure mode's sentence: the built-in condition sources of model differences
    ('digits') cannot, so the Analyses page does not offer them for the fix (it still does for model-diff)."""
    from nemo_desktop.core.app.jobs.analyses import generator_choices
    from nemo_desktop.core.registry import get_analysis

    fix = generator_choices(get_analysis("fix"))
    assert fix and all(ref.startswith("t2i:") for ref in fix)
    diff = generator_choices(get_analysis("model-diff"))
    assert {"digits", "digits-ink"} <= set(diff) and set(fix) <= set(diff)
