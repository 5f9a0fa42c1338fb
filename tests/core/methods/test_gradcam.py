"""Grad-CAM against known answers, and on every classifier family NEMO loads.

Known answers: (1) a CNN with a linear head on globally pooled features, where Grad-CAM has a closed form
(alpha_k = w_ck / (h w)); (2) a CNN and a ViT that only see one quadrant of the image (the input is masked
to it, and the models are built so that nothing outside it reaches the Grad-CAM layer): their maps must
light up exactly that quadrant. Quadrants off the diagonal (top-right, bottom-left) catch a transposed or
mis-reshaped map, and the ViT has register tokens, so the prefix tokens must be dropped correctly.
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.methods.gradcam import (colourise, find_target_layer, gradcam, model_view,
                                               render_overlay)
from nemo_desktop.core.models.protocols import ModelInfo
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

CPU = LoadOptions(device="cpu")
SIDE = 32
QUADRANTS = {"top-left": (0, 0), "top-right": (0, 1), "bottom-left": (1, 0), "bottom-right": (1, 1)}


def quadrant_mask(name: str, side: int = SIDE) -> np.ndarray:
    r, c = QUADRANTS[name]
    m = np.zeros((side, side), bool)
    h = side // 2
    m[r * h:(r + 1) * h, c * h:(c + 1) * h] = True
    return m


def noise_image(seed: int = 0, side: int = SIDE) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(30, 255, (side, side, 3), dtype=np.uint8))


class TensorClassifier:
    """Classifier-protocol test double around a torch module taking (N, 3, 32, 32) floats in [0, 1]."""

    zero_shot = False

    def __init__(self, model, n_classes: int) -> None:
        self.model = model.eval()
        self.class_names = [f"c{i}" for i in range(n_classes)]
        self.info = ModelInfo("test-double:tensor-classifier", "test-double", "1")
        self.data_config = {"input_size": (3, SIDE, SIDE)}

    def preprocess(self, images):
        import torch

        arr = np.stack([np.asarray(im.convert("RGB").resize((SIDE, SIDE)), dtype=np.float32) / 255 for im in images])
        return torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous()

    def forward_logits(self, pixel_values):
        return self.model(pixel_values)


def _torch():
    import torch

    torch.manual_seed(0)
    return torch


class _InputMask:
    """Builds a module multiplying the input by a fixed quadrant mask (torch imported lazily)."""

    @staticmethod
    def make(quadrant: str):
        torch = _torch()

        class InputMask(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.register_buffer("mask", torch.from_numpy(quadrant_mask(quadrant).astype(np.float32)))

            def forward(self, x):
                return x * self.mask

        return InputMask()


def quadrant_cnn(quadrant: str):
    """Masked input -> two bias-free conv+ReLU (a pooling between) -> global average -> a head with positive
    weights: only the quadrant reaches the features, and every feature counts for the class."""
    torch = _torch()
    net = torch.nn.Sequential(
        _InputMask.make(quadrant),
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for conv in (net[1], net[4]):
            conv.weight.abs_()  # positive filters on a positive image: features are alive in the quadrant
        net[-1].weight.abs_()
    return net


def assert_lights(heat: np.ndarray, quadrant: str, margin: int) -> None:
    inside = quadrant_mask(quadrant, heat.shape[0])
    # Away from the quadrant by more than the receptive field plus one upsampling cell: exactly dark.
    from scipy.ndimage import binary_dilation

    near = binary_dilation(inside, structure=np.ones((3, 3), bool), iterations=margin)
    assert heat[~near].max() == 0.0, f"heat outside {quadrant}: {heat[~near].max()}"
    mass = heat.sum()
    assert mass > 0
    assert heat[inside].sum() / mass > 0.85
    assert heat[inside].mean() > 0.2
    r, c = np.unravel_index(np.argmax(heat), heat.shape)
    assert inside[r, c], f"peak at {(r, c)} is not in the {quadrant} quadrant"


def test_closed_form_for_a_linear_head_cnn():
    torch = _torch()
    conv = torch.nn.Conv2d(3, 5, 3, padding=1)
    head = torch.nn.Linear(5, 4)
    net = torch.nn.Sequential(conv, torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), head)
    clf = TensorClassifier(net, 4)
    img = noise_image(3)
    for target in (0, 2):
        cam = gradcam(clf, img, target_index=target)
        assert cam.layer == "1" and cam.layout == "nchw" and cam.grid == (SIDE, SIDE)
        with torch.no_grad():
            a = torch.relu(conv(clf.preprocess([img])))[0].numpy()  # (5, 32, 32)
        w = head.weight.detach().numpy()[target]
        expected = np.tensordot(w / (SIDE * SIDE), a, axes=1)
        np.testing.assert_allclose(cam.raw, expected, rtol=1e-4, atol=1e-7)
        positive = np.maximum(expected, 0)
        np.testing.assert_allclose(cam.heatmap, positive / positive.max(), rtol=1e-4, atol=1e-6)
        with torch.no_grad():
            assert cam.target_logit == pytest.approx(float(net(clf.preprocess([img]))[0, target]), rel=1e-5)


@pytest.mark.parametrize("quadrant", ["top-left", "top-right", "bottom-left"])
def test_cnn_that_sees_one_quadrant_lights_it_up(quadrant):
    clf = TensorClassifier(quadrant_cnn(quadrant), 3)
    cam = gradcam(clf, noise_image(1))
    assert cam.layer == "5"  # the last ReLU: the last 4-D map with more than one position
    assert cam.grid == (16, 16) and cam.heatmap.shape == (SIDE, SIDE)
    # Receptive field: 1 px (conv) + 1 px (pooling) + 2 px (conv on the pooled map) + 1 px (bilinear upsampling).
    assert_lights(cam.heatmap, quadrant, margin=5)


class MaskedTimm:
    """Wraps a TimmClassifier loaded through the real loader: its input is masked to one quadrant."""

    def __init__(self, inner, quadrant: str) -> None:
        import torch

        self.inner = inner
        self.model = inner.model
        self.class_names, self.info, self.zero_shot = inner.class_names, inner.info, False
        self.data_config = inner.data_config
        self.mask = torch.from_numpy(quadrant_mask(quadrant).astype(np.float32))

    def preprocess(self, images):
        return self.inner.preprocess(images) * self.mask

    def forward_logits(self, pixel_values):
        return self.inner.forward_logits(pixel_values)


@pytest.fixture(scope="module")
def quadrant_vit_dir(tmp_path_factory):
    """A one-block timm ViT (patch 8 on 32 px: a 4x4 grid; CLS + 2 register tokens) with no position
    embedding and a bias-free patch embedding, so a blank patch gives an all-zero token; saved with
    save_for_hf and loaded back through NEMO's timm loader."""
    import timm

    torch = _torch()
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=3, img_size=SIDE, patch_size=8,
                              embed_dim=32, depth=1, num_heads=2, reg_tokens=2)
    with torch.no_grad():
        model.pos_embed.zero_()
        model.patch_embed.proj.bias.zero_()
    folder = tmp_path_factory.mktemp("quadrant-vit")
    timm.models.save_for_hf(model, str(folder), safe_serialization=True,
                            data_config={"input_size": (3, SIDE, SIDE), "crop_pct": 1.0})
    return folder


@pytest.mark.parametrize("quadrant", ["top-right", "bottom-left"])
def test_vit_that_sees_one_quadrant_lights_it_up(quadrant_vit_dir, quadrant):
    inner = load_model(ModelSpec("classifier", "timm", f"local-dir:{quadrant_vit_dir}"), CPU)
    clf = MaskedTimm(inner, quadrant)
    target = find_target_layer(clf)
    assert target.name == "blocks.0.norm1" and target.layout == "tokens" and target.prefix_tokens == 3
    cam = gradcam(clf, noise_image(2))
    assert cam.grid == (4, 4)  # 19 tokens - CLS - 2 registers = 16 patches
    assert_lights(cam.heatmap, quadrant, margin=4)
    # The token map itself: the patches of the quadrant, nothing else.
    r, c = QUADRANTS[quadrant]
    outside = np.ones((4, 4), bool)
    outside[2 * r:2 * r + 2, 2 * c:2 * c + 2] = False
    assert np.all(cam.raw[outside] == 0)


# -- every family NEMO loads ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def families(tmp_path_factory):
    from fixtures_tiny.classifiers import (TINY_CLASSES, build_tiny_clip, build_tiny_open_clip, build_tiny_siglip,
                                          build_tiny_timm)

    root = tmp_path_factory.mktemp("gradcam-families")
    oc = build_tiny_open_clip(root / "open_clip")
    return {
        "timm-cnn": ModelSpec("classifier", "timm", f"local-dir:{build_tiny_timm(root / 'cnn', input_size=32)}"),
        "timm-vit": ModelSpec("classifier", "timm", "local-dir:" + str(_tiny_vit(root / "vit"))),
        "timm-swin": ModelSpec("classifier", "timm", "local-dir:" + str(_tiny_swin(root / "swin"))),
        "hf-clip": ModelSpec("classifier", "hf-clip", str(build_tiny_clip(root / "clip")),
                             options={"class_names": TINY_CLASSES}),
        "hf-siglip": ModelSpec("classifier", "hf-siglip", str(build_tiny_siglip(root / "siglip")),
                               options={"class_names": TINY_CLASSES}),
        "open_clip": ModelSpec("classifier", "open_clip", f"local-dir:{oc['local_dir']}",
                               options={"class_names": TINY_CLASSES}),
    }


def _tiny_vit(folder):
    import timm

    _torch()
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=SIDE, patch_size=8,
                              embed_dim=32, depth=2, num_heads=2)
    timm.models.save_for_hf(model, str(folder), safe_serialization=True,
                            data_config={"input_size": (3, SIDE, SIDE), "crop_pct": 1.0})
    return folder


def _tiny_swin(folder):
    import timm

    _torch()
    model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, num_classes=10, img_size=SIDE,
                              window_size=2, embed_dim=16, depths=(1, 1), num_heads=(1, 1))
    timm.models.save_for_hf(model, str(folder), safe_serialization=True,
                            data_config={"input_size": (3, SIDE, SIDE), "crop_pct": 1.0})
    return folder


EXPECTED_LAYER = {"timm-cnn": None, "timm-swin": None, "timm-vit": "blocks.1.norm1",
                  "hf-clip": "vision_model.encoder.layers.1.layer_norm1",
                  "hf-siglip": "vision_model.encoder.layers.1.layer_norm1",
                  "open_clip": "visual.transformer.resblocks.1.ln_1"}


@pytest.mark.parametrize("family", list(EXPECTED_LAYER))
def test_gradcam_on_each_family_targets_the_prediction(families, family):
    clf = load_model(families[family], CPU)
    img = noise_image(5, 48)
    cam = gradcam(clf, img)
    probs = clf.predict_proba([img])[0]
    assert cam.target_index == int(np.argmax(probs))
    if EXPECTED_LAYER[family]:
        assert cam.layer == EXPECTED_LAYER[family] and cam.layout == "tokens"
        assert cam.grid == (4, 4)  # CLS dropped for CLIP / open_clip / timm; SigLIP has none
    elif family == "timm-swin":  # NHWC maps: 32 px / patch 4 / one merge = a 4x4 grid of 32 channels
        assert cam.layout == "nhwc" and cam.layer == "norm" and cam.grid == (4, 4)
    else:
        assert cam.layout == "nchw" and cam.grid[0] * cam.grid[1] > 1
    pixels = clf.preprocess([img])
    assert cam.heatmap.shape == tuple(pixels.shape[-2:])
    assert cam.heatmap.min() >= 0 and cam.heatmap.max() <= 1
    assert np.isfinite(cam.raw).all() and np.abs(cam.raw).sum() > 0  # a real gradient reached the layer
    # The target is the logit the classifier predicts with (zero-shot: its predicted class's text embedding).
    logits = clf.logits([img])[0]
    assert cam.target_logit == pytest.approx(float(logits[cam.target_index]), rel=1e-3, abs=1e-4)
    view = model_view(clf, img)
    assert view.size == (pixels.shape[-1], pixels.shape[-2])


def test_zero_shot_gradcam_follows_the_text_embedding(families):
    """Changing the predicted class's prompt changes the Grad-CAM target (its text embedding), not the image."""
    clf = load_model(families["hf-clip"], CPU)
    img = noise_image(6, 48)
    cam = gradcam(clf, img)
    k = cam.target_index
    clf.set_class_prompt(k, "a drawing of a class name")
    other = gradcam(clf, img, target_index=k)
    assert other.target_logit != pytest.approx(cam.target_logit)
    assert not np.allclose(other.raw, cam.raw)


def test_overlay_is_hot_where_the_map_is_high():
    img = Image.new("RGB", (40, 30), (128, 128, 128))
    heat = np.zeros((10, 10), np.float32)
    heat[:5, 5:] = 1.0  # top-right
    out = render_overlay(img, heat, alpha=0.6)
    assert out.size == img.size and out.mode == "RGB"
    arr = np.asarray(out, dtype=np.float64)
    hot, cold = arr[2:10, 30:38], arr[20:28, 2:10]
    assert hot[..., 0].mean() > cold[..., 0].mean() + 40  # red where hot
    assert cold[..., 2].mean() > hot[..., 2].mean() + 40  # blue where cold
    big = render_overlay(img, heat, min_side=90)
    assert min(big.size) == 90 and big.size[0] == 120
    assert tuple(colourise(np.array([[0.0, 1.0]]))[0, 0]) == (0, 0, 143)


# -- a layer chosen by hand ------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["timm-vit", "hf-clip", "hf-siglip", "open_clip"])
def test_explicit_layer_naming_the_automatic_one_gives_the_same_map(families, family):
    clf = load_model(families[family], CPU)
    img = noise_image(7, 48)
    auto = gradcam(clf, img)
    chosen = gradcam(clf, img, layer=EXPECTED_LAYER[family])
    assert chosen.layer == auto.layer and chosen.grid == auto.grid
    np.testing.assert_array_equal(chosen.raw, auto.raw)
    np.testing.assert_array_equal(chosen.heatmap, auto.heatmap)


def _vit_with_registers(folder, img_size, reg_tokens):
    import timm

    _torch()
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=img_size,
                              patch_size=8, embed_dim=32, depth=2, num_heads=2, reg_tokens=reg_tokens)
    h, w = img_size
    timm.models.save_for_hf(model, str(folder), safe_serialization=True,
                            data_config={"input_size": (3, h, w), "crop_pct": 1.0})
    return load_model(ModelSpec("classifier", "timm", f"local-dir:{folder}"), CPU)


@pytest.mark.parametrize("img_size, reg_tokens, grid", [
    ((32, 48), 4, (4, 6)),  # non-square: 24 patches + CLS + 4 registers
    ((32, 32), 9, (4, 4)),  # 16 patches + CLS + 9 registers = 26 tokens: a 5x5 square would fit if guessed
])
def test_explicit_token_layer_keeps_prefix_tokens_and_patch_size(tmp_path, img_size, reg_tokens, grid):
    clf = _vit_with_registers(tmp_path / "vit", img_size, reg_tokens)
    assert tuple(clf.preprocess([noise_image(1, 40)]).shape[-2:]) == img_size
    img = noise_image(8, 40)
    auto = gradcam(clf, img)
    assert auto.grid == grid
    for name in ("blocks.1.norm1", clf.model.blocks[1].norm1):  # by name and by module
        chosen = gradcam(clf, img, layer=name)
        assert chosen.grid == grid and chosen.layer == "blocks.1.norm1"
        np.testing.assert_array_equal(chosen.raw, auto.raw)
    earlier = find_target_layer(clf, "blocks.0.norm1")
    assert earlier.prefix_tokens == 1 + reg_tokens and earlier.patch_size == (8, 8)
    assert gradcam(clf, img, layer="blocks.0.norm1").grid == grid
    clf.gradcam_layer = "blocks.1.norm1"  # the classifier's own setting takes the same path
    np.testing.assert_array_equal(gradcam(clf, img).raw, auto.raw)
