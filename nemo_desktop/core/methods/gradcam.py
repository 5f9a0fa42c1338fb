"""Grad-CAM (Selvaraju et al., 2017) for the classifiers NEMO loads, and its overlay (PIL only).

    cam = gradcam(classifier, image)                 # target: the predicted class
    cam.heatmap                                      # (H, W) float32 in [0, 1] at the model's input size
    overlay = render_overlay(model_view(classifier, image), cam.heatmap)

Grad-CAM of class c at layer A (K channels): alpha_k = mean over positions of dY_c/dA_k, map =
ReLU(sum_k alpha_k A_k), upsampled bilinearly to the input and divided by its maximum. Y_c is the logit the
classifier's own `forward_logits` returns, so for CLIP / SigLIP / open_clip zero-shot classifiers it is
scale * cos(image embedding, text embedding of class c) (+ bias): the target is the predicted class's text
embedding, exactly as it classifies.

Where the map is taken (`find_target_layer`, or `layer=` / the classifier's `gradcam_layer` attribute; a token
layer chosen that way keeps the tower's prefix-token count and patch size, so naming the automatic layer
gives the automatic map, also for non-square inputs and register tokens):
  * timm ViTs (and DeiT/EVA-like models with `blocks` and prefix tokens): the input of the last block's
    attention, `blocks[-1].norm1`. The final tokens do not work: with CLS pooling only the CLS token reaches
    the head, so patch tokens get no gradient there. Tokens are (N, D); the prefix tokens (CLS, registers,
    distillation) are dropped and the rest reshaped to the patch grid (row-major, as patch embedding lays
    them out);
  * Hugging Face CLIP / SigLIP image towers: `vision_model.encoder.layers[-1].layer_norm1` (CLIP has one
    CLS token, SigLIP none);
  * open_clip ViT towers: `visual.transformer.resblocks[-1].ln_1` (CLS token when the model has one);
    open_clip ResNet towers: `visual.layer4`;
  * anything else (timm CNNs, user models): the last module, in execution order, whose output is a 4-D
    map with more than one position: the last convolutional feature map, Grad-CAM's usual choice. Maps are
    NCHW, except for timm models that declare `output_fmt == "NHWC"` (Swin), whose maps are NHWC.

Why not a library: pytorch-grad-cam (`grad-cam` on PyPI) pulls opencv, matplotlib, ttach and more for what
is ~100 lines here, and captum pulls matplotlib; neither knows the layouts of the towers above, which are
the part that needs care. This implementation is tested against known answers (tests/core/methods/
test_gradcam.py): the closed form for a linear-head CNN, and models that only see one quadrant.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from PIL import Image

from ..base.errors import ConfigError, ModelError

LAYOUT_NCHW, LAYOUT_NHWC, LAYOUT_TOKENS = "nchw", "nhwc", "tokens"


@dataclass
class TargetLayer:
    name: str  # dotted module name inside the model ("" when unknown)
    module: Any  # torch.nn.Module
    layout: str  # "nchw" | "nhwc" | "tokens"
    prefix_tokens: int | None = None  # tokens before the patch tokens (CLS, registers); None = infer
    patch_size: tuple[int, int] | None = None  # pixels per token, to recover the grid of non-square inputs


@dataclass
class GradCAMResult:
    heatmap: np.ndarray  # (H, W) float32 in [0, 1] at the model's input resolution
    raw: np.ndarray  # (h, w) float32 map at the layer's resolution, before ReLU-normalisation (signed)
    target_index: int
    target_logit: float
    layer: str
    layout: str
    grid: tuple[int, int]

    def to_meta(self) -> dict[str, Any]:
        return {"target_index": self.target_index, "target_logit": self.target_logit, "layer": self.layer,
                "layout": self.layout, "grid": list(self.grid), "input_size": list(self.heatmap.shape)}


# -- target layers ---------------------------------------------------------------------------------------------
def _model_of(classifier: Any) -> Any:
    model = getattr(classifier, "model", None)
    if model is None:
        raise ConfigError(f"Grad-CAM needs the torch model of {type(classifier).__name__} (a `model` attribute).",
                          hint="Expose the network as `classifier.model` and its layer as `gradcam_layer`.")
    return model


def _named(model: Any, module: Any) -> str:
    for name, m in model.named_modules():
        if m is module:
            return name
    return ""


def _pair(x: Any) -> tuple[int, int] | None:
    if x is None:
        return None
    if isinstance(x, (tuple, list)):
        return int(x[0]), int(x[1])
    return int(x), int(x)


# Auto-detected layers per model (the generic search costs one probing forward pass).
_DETECTED: "weakref.WeakKeyDictionary[Any, TargetLayer]" = weakref.WeakKeyDictionary()


def find_target_layer(classifier: Any, layer: str | Any | None = None) -> TargetLayer:
    """The layer Grad-CAM reads (see the module docstring); `layer` = a dotted name or module overrides."""
    model = _model_of(classifier)
    override = layer if layer is not None else getattr(classifier, "gradcam_layer", None)
    if override is None:
        return _detected(classifier, model)
    module = model.get_submodule(override) if isinstance(override, str) else override
    name = override if isinstance(override, str) else _named(model, module)
    layout = _probe_layout(classifier, module)
    if layout != LAYOUT_TOKENS:
        return TargetLayer(name, module, layout)
    # A token layer chosen by hand keeps the tower's geometry (prefix tokens, patch size), which only the
    # model knows: without it a non-square input cannot be laid out and register tokens shift the grid.
    prefix, patch = _token_geometry(model)
    return TargetLayer(name, module, LAYOUT_TOKENS, prefix, patch)


def _detected(classifier: Any, model: Any) -> TargetLayer:
    try:
        return _DETECTED[model]
    except (KeyError, TypeError):
        pass
    target = _detect(classifier, model)
    try:
        _DETECTED[model] = target
    except TypeError:  # not weak-referenceable: detect again next time
        pass
    return target


def _token_geometry(model: Any) -> tuple[int | None, tuple[int, int] | None]:
    """(prefix tokens, patch size) of the model's ViT tower, the same values the automatic choice uses;
    (None, None) when the model is not one of the towers `_detect` knows (then the grid is inferred)."""
    blocks = getattr(model, "blocks", None)
    if blocks is not None and hasattr(model, "patch_embed"):  # timm ViT / DeiT / EVA
        return (int(getattr(model, "num_prefix_tokens", 1)),
                _pair(getattr(model.patch_embed, "patch_size", None)))
    vision = getattr(model, "vision_model", None)  # transformers CLIPModel / SiglipModel
    if vision is not None and hasattr(vision, "encoder"):
        prefix = 1 if hasattr(getattr(vision, "embeddings", None), "class_embedding") else 0
        return prefix, _pair(getattr(getattr(vision, "config", None), "patch_size", None))
    visual = getattr(model, "visual", None)  # open_clip
    if visual is not None and hasattr(getattr(visual, "transformer", None), "resblocks"):
        prefix = 1 if getattr(visual, "class_embedding", None) is not None else 0
        return prefix, _pair(getattr(visual, "patch_size", None))
    return None, None


def _detect(classifier: Any, model: Any) -> TargetLayer:

    prefix, ps = _token_geometry(model)
    blocks = getattr(model, "blocks", None)
    if blocks is not None and hasattr(model, "patch_embed") and len(blocks) and hasattr(blocks[-1], "norm1"):
        return TargetLayer(f"blocks.{len(blocks) - 1}.norm1", blocks[-1].norm1, LAYOUT_TOKENS, prefix, ps)

    vision = getattr(model, "vision_model", None)  # transformers CLIPModel / SiglipModel
    if vision is not None and hasattr(vision, "encoder"):
        layers = vision.encoder.layers
        return TargetLayer(f"vision_model.encoder.layers.{len(layers) - 1}.layer_norm1", layers[-1].layer_norm1,
                           LAYOUT_TOKENS, prefix, ps)

    visual = getattr(model, "visual", None)  # open_clip
    if visual is not None:
        transformer = getattr(visual, "transformer", None)
        if transformer is not None and hasattr(transformer, "resblocks"):
            n = len(transformer.resblocks)
            return TargetLayer(f"visual.transformer.resblocks.{n - 1}.ln_1", transformer.resblocks[-1].ln_1,
                               LAYOUT_TOKENS, prefix, ps)
        if hasattr(visual, "layer4"):
            return TargetLayer("visual.layer4", visual.layer4, LAYOUT_NCHW)

    return _last_feature_map(classifier, model)


def _probe_layout(classifier: Any, module: Any) -> str:
    shapes, _ = _probe_outputs(classifier, [module])
    shape = shapes.get(id(module))
    if shape is None:
        raise ConfigError("The Grad-CAM layer is not used by the classifier's forward pass.")
    if len(shape) == 4:
        return LAYOUT_NCHW
    if len(shape) == 3:
        return LAYOUT_TOKENS
    raise ConfigError(f"The Grad-CAM layer's output has shape {tuple(shape)}; a (N, C, H, W) map or (N, tokens, "
                      "D) sequence is needed.", hint="Choose a convolutional or transformer-block layer.")


def _probe_outputs(classifier: Any, modules: Sequence[Any]) -> tuple[dict[int, tuple[int, ...]], list[int]]:
    """Output shapes of `modules` (by id; last call wins) and the ids in call order, for one forward pass of
    a blank image."""
    import torch

    size = _input_side(classifier)
    shapes: dict[int, tuple[int, ...]] = {}
    order: list[int] = []

    def hook(mod, _inp, out):
        t = out[0] if isinstance(out, (tuple, list)) and out else out
        if isinstance(t, torch.Tensor):
            shapes[id(mod)] = tuple(t.shape)
            order.append(id(mod))

    handles = [m.register_forward_hook(hook) for m in modules]
    try:
        with torch.no_grad():
            classifier.forward_logits(classifier.preprocess([Image.new("RGB", (size, size), (128, 128, 128))]))
    finally:
        for h in handles:
            h.remove()
    return shapes, order


def _input_side(classifier: Any) -> int:
    cfg = getattr(classifier, "data_config", None) or {}
    size = cfg.get("input_size") if isinstance(cfg, dict) else None
    return int(size[-1]) if size else 224


def _last_feature_map(classifier: Any, model: Any) -> TargetLayer:
    modules = [m for _, m in model.named_modules() if m is not model]
    shapes, order = _probe_outputs(classifier, modules)
    by_id = {id(m): m for m in modules}
    nhwc = str(getattr(model, "output_fmt", "NCHW")).upper().endswith("NHWC")
    for mid in reversed(order):
        s = shapes[mid]
        if len(s) == 4 and (s[1] * s[2] if nhwc else s[2] * s[3]) > 1:
            module = by_id[mid]
            return TargetLayer(_named(model, module), module, LAYOUT_NHWC if nhwc else LAYOUT_NCHW)
    raise ConfigError(f"No convolutional feature map found in {type(model).__name__} for Grad-CAM.",
                      hint="Set `gradcam_layer` on the classifier (a dotted module name) to choose the layer.")


# -- Grad-CAM --------------------------------------------------------------------------------------------------
def gradcam(classifier: Any, image: Image.Image, *, target_index: int | None = None,
            layer: str | Any | None = None, target: TargetLayer | None = None) -> GradCAMResult:
    """Grad-CAM of `target_index` (default: the predicted class) for one image."""
    import torch

    target = target or find_target_layer(classifier, layer)
    captured: dict[str, Any] = {}

    def hook(_mod, _inp, out):
        captured["act"] = out[0] if isinstance(out, (tuple, list)) else out

    handle = target.module.register_forward_hook(hook)
    try:
        with torch.enable_grad():
            pixels = classifier.preprocess([image.convert("RGB")]).detach().clone()
            if pixels.is_floating_point():
                pixels.requires_grad_(True)  # a graph through the layer even if the weights are frozen
            logits = classifier.forward_logits(pixels)
            index = int(logits[0].argmax()) if target_index is None else int(target_index)
            if not 0 <= index < logits.shape[-1]:
                raise ConfigError(f"Grad-CAM target class {index} is out of range ({logits.shape[-1]} classes).")
            act = captured.get("act")
            if act is None:
                raise ModelError(f"The Grad-CAM layer '{target.name}' was not reached by the forward pass.")
            score = logits[0, index]
            (grad,) = torch.autograd.grad(score, act, allow_unused=True)
            if grad is None:
                raise ModelError(f"The class score does not depend on the Grad-CAM layer '{target.name}'.",
                                 hint="Choose a layer before the classification head.")
    finally:
        handle.remove()
    act_map, grad_map = _to_nchw(act.detach().float(), grad.detach().float(), target, pixels.shape[-2:])
    weights = grad_map.mean(dim=(2, 3), keepdim=True)
    raw = (weights * act_map).sum(dim=1)[0]  # (h, w), signed
    cam = torch.relu(raw)
    up = torch.nn.functional.interpolate(cam[None, None], size=tuple(pixels.shape[-2:]), mode="bilinear",
                                         align_corners=False)[0, 0]
    peak = float(up.max())
    heat = (up / peak) if peak > 0 else torch.zeros_like(up)
    return GradCAMResult(heatmap=heat.clamp_(0, 1).cpu().numpy().astype(np.float32),
                         raw=raw.cpu().numpy().astype(np.float32), target_index=index,
                         target_logit=float(score.detach().float()), layer=target.name, layout=target.layout,
                         grid=(int(raw.shape[0]), int(raw.shape[1])))


def _to_nchw(act, grad, target: TargetLayer, input_hw) -> tuple[Any, Any]:
    if target.layout in (LAYOUT_NCHW, LAYOUT_NHWC):
        if act.ndim != 4:
            raise ModelError(f"Grad-CAM layer '{target.name}' gave a {act.ndim}-D output, not a 4-D map.")
        if target.layout == LAYOUT_NHWC:
            act, grad = act.permute(0, 3, 1, 2), grad.permute(0, 3, 1, 2)
        return act[:1], grad[:1]
    if act.ndim != 3:
        raise ModelError(f"Grad-CAM layer '{target.name}' gave a {act.ndim}-D output, not a token sequence.")
    if act.shape[0] != 1 and act.shape[1] == 1:  # sequence-first transformers: (tokens, batch, dim)
        act, grad = act.transpose(0, 1), grad.transpose(0, 1)
    n = int(act.shape[1])
    gh, gw = _grid(n, target, input_hw)
    prefix = n - gh * gw
    act, grad = act[:1, prefix:], grad[:1, prefix:]  # drop CLS / register tokens
    to_map = lambda t: t.reshape(1, gh, gw, t.shape[-1]).permute(0, 3, 1, 2)  # noqa: E731
    return to_map(act), to_map(grad)


def _grid(n_tokens: int, target: TargetLayer, input_hw) -> tuple[int, int]:
    h, w = int(input_hw[0]), int(input_hw[1])
    if target.patch_size:
        gh, gw = h // target.patch_size[0], w // target.patch_size[1]
        if 0 < gh * gw <= n_tokens and (target.prefix_tokens is None or gh * gw + target.prefix_tokens == n_tokens):
            return gh, gw
    patches = n_tokens - (target.prefix_tokens or 0) if target.prefix_tokens is not None else None
    if patches is None:  # infer: the largest square not above the token count
        patches = int(math.isqrt(n_tokens)) ** 2
    # A non-square input keeps the image's aspect ratio in its grid.
    gh = max(1, round(math.sqrt(patches * h / w)))
    gw = patches // gh
    if gh * gw != patches:
        raise ModelError(f"Cannot lay {patches} tokens out on a grid for a {w}x{h} input.",
                         hint="Set `gradcam_layer` to a convolutional layer, or use a square input.")
    return gh, gw


# -- what the classifier saw, and the overlay ------------------------------------------------------------------
def model_view(classifier: Any, image: Image.Image) -> Image.Image:
    """The image as the classifier sees it (resized and cropped, not normalised), so that the heatmap, which
    is at the model's input resolution, lies on the right pixels. Falls back to a plain resize."""
    image = image.convert("RGB")
    try:
        view = _model_view(classifier, image)
    except Exception:  # noqa: BLE001 - a view for display only: fall back rather than fail the method
        view = None
    if view is not None:
        return view
    side = _input_side(classifier)
    return image.resize((side, side), Image.BILINEAR)


def _model_view(classifier: Any, image: Image.Image) -> Image.Image | None:
    fn = getattr(classifier, "model_view", None)
    if callable(fn):
        return fn(image)
    transform = getattr(classifier, "transform", None)
    processor = getattr(classifier, "processor", None)
    if processor is not None and hasattr(processor, "image_processor"):  # transformers
        arr = processor.image_processor(images=[image], do_normalize=False, do_rescale=False,
                                        return_tensors="np")["pixel_values"][0]
        return _chw_to_image(np.asarray(arr, dtype=np.float64))
    if transform is not None:
        steps = list(getattr(transform, "transforms", [transform]))
        steps = [t for t in steps if type(t).__name__ != "Normalize"]  # open_clip ends with Normalize
        x = image
        for t in steps:
            x = t(x)
        if isinstance(x, Image.Image):
            return x.convert("RGB")
        arr = np.asarray(x.detach().cpu().float().numpy() if hasattr(x, "detach") else x, dtype=np.float64)
        return _chw_to_image(arr * 255.0 if arr.max() <= 1.0 + 1e-6 else arr)
    return None


def _chw_to_image(arr: np.ndarray) -> Image.Image:
    return Image.fromarray(np.clip(np.rint(arr.transpose(1, 2, 0)), 0, 255).astype(np.uint8), "RGB")


# Jet-like colour map: blue (0) -> cyan -> yellow -> red (1), piecewise linear, no matplotlib needed.
_STOPS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
_COLOURS = np.array([[0, 0, 143], [0, 128, 255], [128, 255, 128], [255, 128, 0], [143, 0, 0]], dtype=np.float64)


def colourise(heatmap: np.ndarray) -> np.ndarray:
    """(H, W) values in [0, 1] -> (H, W, 3) uint8 jet colours."""
    h = np.clip(np.asarray(heatmap, dtype=np.float64), 0, 1)
    rgb = np.stack([np.interp(h, _STOPS, _COLOURS[:, c]) for c in range(3)], axis=-1)
    return np.rint(rgb).astype(np.uint8)


def render_overlay(image: Image.Image, heatmap: np.ndarray, *, alpha: float = 0.5,
                   min_side: int = 0) -> Image.Image:
    """The heatmap in jet colours blended over `image` (resized to the image, bilinear). With `min_side`,
    small images are enlarged first so the overlay stays legible (e.g. for an MLLM)."""
    image = image.convert("RGB")
    if min_side and min(image.size) < min_side:
        scale = min_side / min(image.size)
        image = image.resize((round(image.width * scale), round(image.height * scale)), Image.BICUBIC)
    heat = Image.fromarray(np.clip(np.asarray(heatmap, dtype=np.float32) * 255.0, 0, 255).astype(np.uint8), "L")
    heat = np.asarray(heat.resize(image.size, Image.BILINEAR), dtype=np.float64) / 255.0
    colours = Image.fromarray(colourise(heat), "RGB")
    return Image.blend(image, colours, float(alpha))
