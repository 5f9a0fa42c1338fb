"""Classifier families on tiny random models saved with their libraries' own save functions and loaded
through the registry exactly like real checkpoints (timm, HF CLIP, HF SigLIP, open_clip).

`test_standard_*` loop over every registered classifier family: a new family fails here until it gets a
tiny fixture in `STANDARD_SPECS`, and then gets the standard checks for free."""
from __future__ import annotations

import hashlib

import pickle
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fixtures_tiny.classifiers import (OPEN_CLIP_TINY_NAME, TINY_CLASSES, build_tiny_clip, build_tiny_open_clip,
                                       build_tiny_siglip, build_tiny_timm, install_in_hf_cache, write_class_file)
from nemo_desktop.core.base.errors import ConfigError, ModelError, OutOfMemoryError, WeightsNotFoundError
from nemo_desktop.core.models.protocols import Classifier, ModelInfo, ZeroShotClassifier
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, list_families, load_model
from nemo_desktop.core.models.vocab import load_vocabulary

torch = pytest.importorskip("torch")

CPU = LoadOptions(device="cpu")
COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def _sha256_of(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# -- fixtures ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-classifiers")
    open_clip_paths = build_tiny_open_clip(root / "open_clip")
    return {"root": root,
            "timm": build_tiny_timm(root / "timm", label_names=TINY_CLASSES),
            "clip": build_tiny_clip(root / "clip"),
            "siglip": build_tiny_siglip(root / "siglip"),
            **{f"open_clip_{k}": v for k, v in open_clip_paths.items()}}


def standard_spec(family: str, tiny) -> ModelSpec:
    names = {"class_names": TINY_CLASSES}
    specs = {
        "timm": ModelSpec("classifier", "timm", f"local-dir:{tiny['timm']}"),
        "hf-clip": ModelSpec("classifier", "hf-clip", str(tiny["clip"]), options=names),
        "hf-siglip": ModelSpec("classifier", "hf-siglip", str(tiny["siglip"]), options=names),
        "open_clip": ModelSpec("classifier", "open_clip", f"local-dir:{tiny['open_clip_local_dir']}", options=names),
    }
    if family not in specs:
        pytest.fail(f"classifier family '{family}' has no tiny fixture: add one to standard_spec()")
    return specs[family]


@pytest.fixture(scope="session")
def loaded(tiny):
    cache = {}

    def get(family):
        if family not in cache:
            cache[family] = load_model(standard_spec(family, tiny), CPU)
        return cache[family]

    return get


@pytest.fixture(scope="session")
def images():
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (40 + 7 * i, 56, 3), dtype=np.uint8)) for i in range(5)]


CLASSIFIER_FAMILIES = [f for _, f in list_families("classifier")]
ZERO_SHOT = ("hf-clip", "hf-siglip", "open_clip")


# -- the standard checks, for every registered family -----------------------------------------------------

def test_every_paper_family_is_registered():
    assert {"timm", "hf-clip", "hf-siglip", "open_clip"} <= set(CLASSIFIER_FAMILIES)


@pytest.mark.parametrize("family", CLASSIFIER_FAMILIES)
def test_standard_protocol_and_info(family, loaded):
    clf = loaded(family)
    assert isinstance(clf, Classifier)
    assert isinstance(clf.info, ModelInfo) and clf.info.family == family and clf.info.revision
    assert list(clf.class_names) == TINY_CLASSES
    assert clf.zero_shot is (family in ZERO_SHOT)
    assert isinstance(clf, ZeroShotClassifier) is (family in ZERO_SHOT)


@pytest.mark.parametrize("family", CLASSIFIER_FAMILIES)
def test_standard_probabilities_are_valid(family, loaded, images):
    probs = loaded(family).predict_proba(images)
    assert probs.shape == (len(images), len(TINY_CLASSES)) and probs.dtype == np.float32
    assert (probs >= 0).all() and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert loaded(family).predict_proba([]).shape == (0, len(TINY_CLASSES))


@pytest.mark.parametrize("family", CLASSIFIER_FAMILIES)
def test_standard_embeddings_are_unit_norm(family, loaded, images):
    emb = loaded(family).embed(images)
    assert emb.ndim == 2 and emb.shape[0] == len(images) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(emb[0], emb[1])  # different images, different features


@pytest.mark.parametrize("family", CLASSIFIER_FAMILIES)
def test_standard_forward_logits_is_differentiable_and_matches_predict(family, loaded, images):
    clf = loaded(family)
    x = clf.preprocess(images[:3]).detach().requires_grad_(True)
    logits = clf.forward_logits(x)
    assert logits.shape == (3, len(TINY_CLASSES)) and logits.requires_grad
    logits[:, 1].sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    expected = torch.softmax(logits.detach().float(), dim=-1).numpy()
    assert np.allclose(clf.predict_proba(images[:3]), expected, atol=1e-5)


@pytest.mark.parametrize("family", CLASSIFIER_FAMILIES)
def test_standard_one_pass_equals_the_two_calls(family, loaded, images):
    """predict_with_embeddings (one forward pass) gives exactly what predict_proba + embed gave, also through
    the input pipeline's split (prepare_batch on a worker, to_device + outputs_from_pixels on the model)."""
    from nemo_desktop.core.models.outputs import predict_with_embeddings

    clf = loaded(family)
    probs, emb = clf.predict_with_embeddings(images)
    np.testing.assert_allclose(probs, clf.predict_proba(images), rtol=0, atol=1e-7)
    np.testing.assert_allclose(emb, clf.embed(images), rtol=0, atol=1e-7)
    out = clf.outputs_from_pixels(clf.to_device(clf.prepare_batch(images)))
    np.testing.assert_allclose(out.probs, probs, rtol=0, atol=1e-7)
    np.testing.assert_allclose(out.embeddings, emb, rtol=0, atol=1e-7)
    assert out.logits.shape == probs.shape and (out.logits.argmax(1) == probs.argmax(1)).all()
    p0, e0 = clf.predict_with_embeddings([])
    assert p0.shape == (0, len(TINY_CLASSES)) and len(e0) == 0
    helper_p, helper_e = predict_with_embeddings(clf, images)
    np.testing.assert_allclose(helper_p, probs, atol=1e-7)
    if family in ZERO_SHOT:  # a one-call prompt override reaches the one-pass path too
        override = {1: "a photo of a small red boat."}
        p_over, e_over = clf.predict_with_embeddings(images, class_prompts=override)
        np.testing.assert_allclose(p_over, clf.predict_proba(images, class_prompts=override), atol=1e-7)
        np.testing.assert_allclose(e_over, emb, atol=1e-7)
        assert not np.allclose(p_over, probs)


@pytest.mark.parametrize("arch", ["test_vit", "test_convnext", "test_efficientnet", "test_byobnet"])
def test_timm_one_pass_equals_the_two_calls_across_head_designs(arch, tmp_path, images):
    """timm heads differ (pooling + fc, fc_norm + head, NormMlp heads, conv heads): one pass matches them all."""
    folder = build_tiny_timm(tmp_path / arch, arch=arch, label_names=TINY_CLASSES)
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{folder}"), CPU)
    probs, emb = clf.predict_with_embeddings(images)
    np.testing.assert_allclose(probs, clf.predict_proba(images), rtol=0, atol=1e-7)
    np.testing.assert_allclose(emb, clf.embed(images), rtol=0, atol=1e-7)
    assert emb.shape == (len(images), clf.model.num_features)


@pytest.mark.parametrize("family", CLASSIFIER_FAMILIES)
def test_standard_batching_does_not_change_results(family, loaded, images):
    clf = loaded(family)
    saved = clf.batch_size
    try:
        clf.batch_size = 2
        small = clf.predict_proba(images)
        clf.batch_size = 64
        large = clf.predict_proba(images)
    finally:
        clf.batch_size = saved
    assert np.allclose(small, large, atol=1e-5)


@pytest.mark.parametrize("family", CLASSIFIER_FAMILIES)
def test_standard_prompt_override_is_one_call_only(family, loaded, images):
    clf = loaded(family)
    if not clf.zero_shot:
        with pytest.raises(ConfigError, match="not a zero-shot"):
            clf.predict_proba(images, class_prompts={0: "a photo of a cat on a beach"})
        return
    before_prompt = clf.class_prompt(3)
    base = clf.logits(images)
    new = "a photo of a tree on a sandy beach at night"
    changed = clf.logits(images, class_prompts={3: new})
    others = [i for i in range(len(TINY_CLASSES)) if i != 3]
    assert np.allclose(changed[:, others], base[:, others], atol=1e-5)  # only that class moves
    assert not np.allclose(changed[:, 3], base[:, 3])
    overridden = clf.predict_proba(images, class_prompts={3: new})
    assert np.allclose(overridden.sum(axis=1), 1.0, atol=1e-5)
    # the state is untouched afterwards
    assert clf.class_prompt(3) == before_prompt
    assert np.allclose(clf.logits(images), base, atol=1e-6)
    # and the override equals setting that prompt for good
    try:
        clf.set_class_prompt(3, new)
        assert np.allclose(clf.logits(images), changed, atol=1e-5)
    finally:
        clf.set_class_prompt(3, before_prompt)


@pytest.mark.parametrize("family", ZERO_SHOT)
def test_zero_shot_text_embeddings_share_the_image_space(family, loaded, images):
    clf = loaded(family)
    texts = clf.embed_texts([clf.class_prompt(i) for i in range(len(TINY_CLASSES))])
    assert texts.shape == (len(TINY_CLASSES), clf.embed(images[:1]).shape[1]) and texts.dtype == np.float32
    assert np.allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-5)
    # The classifier's logits are exactly scale * cos(image, text) (+ bias) with these rows.
    expected = clf.logit_scale * clf.embed(images) @ texts.T + (clf.logit_bias or 0.0)
    assert np.allclose(clf.logits(images), expected, atol=1e-4)
    assert clf.embed_texts([]).shape[0] == 0


@pytest.mark.parametrize("family", CLASSIFIER_FAMILIES)
def test_standard_oom_becomes_a_clear_error(family, loaded, images, monkeypatch):
    clf = loaded(family)

    class Exploding(torch.nn.Module):
        def forward(self, *a, **k):
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

        encode_image = get_image_features = forward_features = forward

    monkeypatch.setattr(clf, "model", Exploding())
    with pytest.raises(OutOfMemoryError) as info:
        clf.predict_proba(images)
    assert "smaller" in info.value.hint or "lower" in info.value.hint


# -- timm ----------------------------------------------------------------------------------------------------

def test_timm_uses_the_saved_preprocessing_and_label_names(loaded, tiny, images):
    clf = loaded("timm")
    assert tuple(clf.data_config["input_size"]) == (3, 64, 64)  # a list when timm < 1.0.31 reads config.json
    assert tuple(clf.preprocess(images[:2]).shape) == (2, 3, 64, 64)
    assert clf.info.revision == "sha256:" + _sha256_of(tiny["timm"] / "model.safetensors")


def test_timm_preprocess_equals_timms_own_transform(loaded, images):
    import timm.data

    clf = loaded("timm")
    reference = timm.data.create_transform(**clf.data_config, is_training=False)  # ToTensor + Normalize per image
    expected = torch.stack([reference(im) for im in images])
    assert torch.allclose(clf.preprocess(images), expected, atol=1e-5)


def test_timm_hub_source_loads_from_the_cache_with_its_commit(tiny, tmp_path, images):
    cache = tmp_path / "hub"
    install_in_hf_cache(cache, "nemo-test/tiny-resnet", tiny["timm"], commit=COMMIT)
    opts = LoadOptions(device="cpu", cache_dir=str(cache))
    hub = load_model(ModelSpec("classifier", "timm", "hf-hub:nemo-test/tiny-resnet"), opts)
    assert hub.info.revision == COMMIT
    bare = load_model(ModelSpec("classifier", "timm", "nemo-test/tiny-resnet", revision="main"), opts)
    # a timm model name resolves to its Hub repo (timm/test_resnet.r160_in1k) through timm's pretrained cfg
    install_in_hf_cache(cache, "timm/test_resnet.r160_in1k", tiny["timm"], commit=COMMIT)
    by_name = load_model(ModelSpec("classifier", "timm", "test_resnet.r160_in1k"), opts)
    assert by_name.info.revision == COMMIT
    local = load_model(ModelSpec("classifier", "timm", f"local-dir:{tiny['timm']}"), CPU)
    assert np.allclose(hub.predict_proba(images), local.predict_proba(images), atol=1e-6)
    assert np.allclose(bare.predict_proba(images), local.predict_proba(images), atol=1e-6)


def test_timm_hub_source_missing_offline_says_how_to_download(tmp_path):
    opts = LoadOptions(device="cpu", cache_dir=str(tmp_path / "empty"), local_files_only=True)
    with pytest.raises(WeightsNotFoundError) as info:
        load_model(ModelSpec("classifier", "timm", "hf-hub:nemo-test/not-downloaded"), opts)
    assert "nemo models download" in info.value.hint


def test_timm_imagenet_models_get_imagenet_names(tmp_path):
    folder = build_tiny_timm(tmp_path / "in1k", num_classes=1000)
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{folder}"), CPU)
    assert clf.class_names == list(load_vocabulary("imagenet-1k").names)
    assert clf.class_names[:3] == ["tench", "goldfish", "great white shark"]


def test_timm_wnid_label_names_become_readable(tmp_path):
    folder = build_tiny_timm(tmp_path / "wnids", num_classes=3, label_names=["n01440764", "n01443537", "n15075141"])
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{folder}"), CPU)
    assert clf.class_names == ["tench", "goldfish", "toilet tissue"]


def test_timm_bfloat16(tiny, images):
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{tiny['timm']}"),
                     LoadOptions(device="cpu", dtype="bfloat16"))
    assert clf.preprocess(images[:1]).dtype == torch.bfloat16
    probs = clf.predict_proba(images)
    assert probs.dtype == np.float32 and np.allclose(probs.sum(axis=1), 1.0, atol=1e-4)


@pytest.fixture(scope="session")
def user_checkpoint(tmp_path_factory):
    """The tiny timm weights as a user's .safetensors and .pth files plus a class-name file."""
    import timm
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("user-ckpt")
    torch.manual_seed(0)
    model = timm.create_model("test_resnet", pretrained=False, num_classes=len(TINY_CLASSES))
    state = model.state_dict()
    save_file({k: v.contiguous() for k, v in state.items()}, str(root / "ft.safetensors"))
    torch.save(state, root / "ft.pth")
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}, "epoch": 3}, root / "wrapped.pth")
    return {"root": root, "classes": write_class_file(root / "classes.txt", TINY_CLASSES)}


@pytest.mark.parametrize("filename", ["ft.safetensors", "ft.pth", "wrapped.pth"])
def test_timm_user_checkpoint_loads(filename, user_checkpoint, images):
    ckpt = user_checkpoint["root"] / filename
    spec = ModelSpec("classifier", "timm", f"checkpoint:test_resnet:{ckpt}",
                     options={"class_file": str(user_checkpoint["classes"]), "data_config": {"input_size": (3, 64, 64)}})
    clf = load_model(spec, CPU)
    assert clf.class_names == TINY_CLASSES
    assert clf.info.revision == "sha256:" + _sha256_of(ckpt)
    probs = clf.predict_proba(images)
    assert probs.shape == (len(images), len(TINY_CLASSES)) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_timm_user_checkpoint_via_options_matches_the_file_source(user_checkpoint, images):
    ckpt = user_checkpoint["root"] / "ft.safetensors"
    by_options = load_model(ModelSpec("classifier", "timm", "user checkpoint", options={
        "architecture": "test_resnet", "checkpoint": str(ckpt), "class_names": TINY_CLASSES}), CPU)
    by_source = load_model(ModelSpec("classifier", "timm", f"checkpoint:test_resnet:{ckpt}",
                                     options={"class_names": TINY_CLASSES}), CPU)
    assert np.allclose(by_options.predict_proba(images), by_source.predict_proba(images), atol=1e-6)


def test_timm_user_checkpoint_class_count_mismatch_is_clear(user_checkpoint, tmp_path):
    wrong = write_class_file(tmp_path / "twelve.txt", TINY_CLASSES + ["kite", "lamp"])
    spec = ModelSpec("classifier", "timm", f"checkpoint:test_resnet:{user_checkpoint['root'] / 'ft.safetensors'}",
                     options={"class_file": str(wrong)})
    with pytest.raises(ModelError) as info:
        load_model(spec, CPU)
    assert "10 outputs" in info.value.message and "12 class names" in info.value.message
    assert "one name per output" in info.value.hint


def test_timm_user_checkpoint_needs_class_names_and_a_matching_architecture(user_checkpoint):
    ckpt = user_checkpoint["root"] / "ft.safetensors"
    with pytest.raises(ConfigError, match="class names"):
        load_model(ModelSpec("classifier", "timm", f"checkpoint:test_resnet:{ckpt}"), CPU)
    with pytest.raises(ModelError, match="does not fit"):
        load_model(ModelSpec("classifier", "timm", f"checkpoint:test_vit:{ckpt}",
                             options={"class_names": TINY_CLASSES}), CPU)
    with pytest.raises(ConfigError, match="not a timm architecture"):
        load_model(ModelSpec("classifier", "timm", f"checkpoint:no_such_net:{ckpt}",
                             options={"class_names": TINY_CLASSES}), CPU)
    with pytest.raises(ConfigError, match="Cannot read the checkpoint source"):
        load_model(ModelSpec("classifier", "timm", "checkpoint:test_resnet"), CPU)


class _NotAWeight:  # pickled into a .pth: a safe (weights_only) load must refuse it
    pass


def test_timm_pickled_objects_are_refused(tmp_path):
    path = tmp_path / "evil.pth"
    with open(path, "wb") as fh:
        pickle.dump({"fc.weight": _NotAWeight()}, fh, protocol=2)
    with pytest.raises(ModelError, match="Cannot read the checkpoint") as info:
        load_model(ModelSpec("classifier", "timm", f"checkpoint:test_resnet:{path}",
                             options={"class_names": TINY_CLASSES}), CPU)
    assert "safetensors" in info.value.hint


def test_timm_bad_sources_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="not a timm model folder"):
        load_model(ModelSpec("classifier", "timm", f"local-dir:{tmp_path}"), CPU)
    with pytest.raises(ConfigError, match="not a timm model") as info:
        load_model(ModelSpec("classifier", "timm", "resnet5O"), CPU)
    assert "resnet50" in info.value.hint
    with pytest.raises(ConfigError, match="no pretrained weights called"):
        load_model(ModelSpec("classifier", "timm", "resnet50.no_such_tag"), CPU)


# -- Hugging Face CLIP / SigLIP ------------------------------------------------------------------------------

def test_hf_default_templates(loaded):
    assert loaded("hf-clip").class_prompt(0) == "a photo of a cat."
    assert loaded("hf-siglip").class_prompt(0) == "This is a photo of cat."


def test_siglip_probabilities_follow_the_sigmoid_ranking(loaded, images):
    clf = loaded("hf-siglip")
    assert clf.logit_bias == pytest.approx(-3.0)
    logits = clf.logits(images)
    sigmoid = 1 / (1 + np.exp(-logits))
    probs = clf.predict_proba(images)
    assert (probs.argmax(axis=1) == sigmoid.argmax(axis=1)).all()
    assert (np.argsort(-probs, axis=1, kind="stable") == np.argsort(-sigmoid, axis=1, kind="stable")).all()
    assert not np.allclose(sigmoid.sum(axis=1), 1.0)  # independent scores: why a softmax is needed
    # the bias is a shared shift: it cancels in the softmax
    assert np.allclose(probs, clf.probabilities_from_logits(logits - clf.logit_bias), atol=1e-6)


def test_hf_revision_and_hub_source(tiny, tmp_path, images, loaded):
    assert loaded("hf-clip").info.revision == "sha256:" + _sha256_of(tiny["clip"] / "model.safetensors")
    cache = tmp_path / "hub"
    install_in_hf_cache(cache, "nemo-test/tiny-clip", tiny["clip"], commit=COMMIT)
    hub = load_model(ModelSpec("classifier", "hf-clip", "nemo-test/tiny-clip",
                               options={"class_names": TINY_CLASSES}),
                     LoadOptions(device="cpu", cache_dir=str(cache)))
    assert hub.info.revision == COMMIT
    assert np.allclose(hub.predict_proba(images), loaded("hf-clip").predict_proba(images), atol=1e-6)


def test_hf_family_must_match_the_checkpoint(tiny):
    with pytest.raises(ConfigError, match="'clip' model") as info:
        load_model(ModelSpec("classifier", "hf-siglip", str(tiny["clip"])), CPU)
    assert "hf-clip" in info.value.hint


def test_hf_incomplete_folder_and_partial_cache_are_clear(tiny, tmp_path):
    import shutil

    folder = tmp_path / "model-only"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):  # no processor / tokenizer files
        shutil.copy(tiny["clip"] / name, folder / name)
    with pytest.raises(ModelError, match="could not load the model folder") as info:
        load_model(ModelSpec("classifier", "hf-clip", str(folder)), CPU)
    assert "processor" in info.value.hint
    cache = tmp_path / "hub"
    install_in_hf_cache(cache, "nemo-test/partial-clip", folder, commit=COMMIT)
    with pytest.raises(WeightsNotFoundError, match="missing from the local Hugging Face cache"):
        load_model(ModelSpec("classifier", "hf-clip", "nemo-test/partial-clip"),
                   LoadOptions(device="cpu", cache_dir=str(cache)))


def test_hf_template_vocabulary_and_prompt_options(tiny):
    clf = load_model(ModelSpec("classifier", "hf-clip", str(tiny["clip"]),
                               options={"template": "a sketch of a {}.", "vocabulary": "imagenet-r"}), CPU)
    assert len(clf.class_names) == 200 and clf.class_prompt(0) == "a sketch of a goldfish."
    clf.set_class_names(["cat", "dog"])
    assert clf.prompts == ("a sketch of a cat.", "a sketch of a dog.")
    clf.set_template("art of a {}")
    assert clf.class_prompt(1) == "art of a dog"
    with pytest.raises(ConfigError, match="out of range"):
        clf.predict_proba([Image.new("RGB", (8, 8))], class_prompts={5: "x"})
    with pytest.raises(ConfigError, match="non-empty"):
        clf.predict_proba([Image.new("RGB", (8, 8))], class_prompts={0: "  "})
    with pytest.raises(ConfigError, match="no '\\{\\}'"):
        clf.set_template("a photo")


# -- open_clip -----------------------------------------------------------------------------------------------

def test_open_clip_config_dir_with_checkpoint_matches_local_dir(tiny, loaded, images):
    spec = ModelSpec("classifier", "open_clip", f"{OPEN_CLIP_TINY_NAME}@{tiny['open_clip_checkpoint']}",
                     options={"config_dir": str(tiny["open_clip_config_dir"]), "class_names": TINY_CLASSES})
    clf = load_model(spec, CPU)
    assert clf.info.revision == "sha256:" + _sha256_of(tiny["open_clip_checkpoint"])
    assert clf.class_prompt(0) == "a photo of a cat."
    assert np.allclose(clf.predict_proba(images), loaded("open_clip").predict_proba(images), atol=1e-6)


def test_open_clip_hub_source(tiny, tmp_path, loaded, images):
    cache = tmp_path / "hub"
    install_in_hf_cache(cache, "nemo-test/tiny-open-clip", tiny["open_clip_local_dir"], commit=COMMIT)
    clf = load_model(ModelSpec("classifier", "open_clip", "hf-hub:nemo-test/tiny-open-clip",
                               options={"class_names": TINY_CLASSES}), LoadOptions(device="cpu", cache_dir=str(cache)))
    assert clf.info.revision == COMMIT
    assert np.allclose(clf.predict_proba(images), loaded("open_clip").predict_proba(images), atol=1e-6)


def test_open_clip_never_runs_random_weights(tiny, tmp_path):
    with pytest.raises(ConfigError, match="needs pretrained weights"):
        load_model(ModelSpec("classifier", "open_clip", OPEN_CLIP_TINY_NAME,
                             options={"config_dir": str(tiny["open_clip_config_dir"])}), CPU)
    no_weights = tmp_path / "cfg-only"
    no_weights.mkdir()
    (no_weights / "open_clip_config.json").write_text((tiny["open_clip_local_dir"] / "open_clip_config.json").read_text())
    with pytest.raises(WeightsNotFoundError):
        load_model(ModelSpec("classifier", "open_clip", f"local-dir:{no_weights}"), CPU)
    with pytest.raises(ConfigError, match="not an open_clip model"):
        load_model(ModelSpec("classifier", "open_clip", "No-Such-Model@x"), CPU)


def test_open_clip_pretrained_tags(tmp_path):
    with pytest.raises(ConfigError, match="neither a checkpoint file nor a pretrained tag") as info:
        load_model(ModelSpec("classifier", "open_clip", "ViT-B-32@no_such_tag"), CPU)
    assert "laion2b_s34b_b79k" in info.value.hint
    offline = LoadOptions(device="cpu", cache_dir=str(tmp_path / "empty"), local_files_only=True)
    with pytest.raises(WeightsNotFoundError):  # fetched through the cache helper: no network, a clear error
        load_model(ModelSpec("classifier", "open_clip", "ViT-B-32@laion2b_s34b_b79k"), offline)


@pytest.mark.parametrize("family", ["timm", "hf-clip"])
def test_wrappers_one_pass_equals_the_two_calls(family, loaded, images):
    """The benchmark's class-group view and model-diff's prompt set forward their base once, with the same
    probabilities as their predict_proba and the base's embeddings."""
    from nemo_desktop.core.analyses.model_diff.labels import PromptedClassifier
    from nemo_desktop.core.benchmark.views import ClassifierView

    base = loaded(family)
    view = ClassifierView(base, "groups", ["pets", "car", "rest"], [[0, 1], [2], [3, 4, 5, 6, 7, 8, 9]])
    probs, emb = view.predict_with_embeddings(images)
    np.testing.assert_allclose(probs, view.predict_proba(images), rtol=0, atol=1e-6)
    np.testing.assert_allclose(emb, base.embed(images), rtol=0, atol=1e-7)
    if family == "hf-clip":
        prompted = PromptedClassifier(base, [f"a drawing of a {n}." for n in TINY_CLASSES])
        probs, emb = prompted.predict_with_embeddings(images)
        np.testing.assert_allclose(probs, prompted.predict_proba(images), rtol=0, atol=1e-7)
        np.testing.assert_allclose(emb, base.embed(images), rtol=0, atol=1e-7)
