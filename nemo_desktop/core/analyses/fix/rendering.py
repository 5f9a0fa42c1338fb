"""Targeted data from a failure mode's sentence (issue 29, source (b)): the sentence rendered by a text-to-image
model of the catalog (kind "generator", e.g. FLUX.1 [schnell]), the images labelled with the affected class the
sentence describes.

    extra, sources = rendered_data(data, config, generator, store, ctx)

The generator is injected like the editor: anything with `generate(prompt, n=, seed=, on_step=)` (the diffusers
text-to-image family) or a condition source wrapping one (`.model`, what the app's generator picker gives).
A sentence with `{class}` is written once per affected class with the class name in it; without it, it must
concern one affected class. Rendered images are stored by a key of the prompt, generator, seed and count, so a
resumed fix renders nothing twice (a real generator costs seconds per image).
"""
from __future__ import annotations

from typing import Any

from PIL import Image

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from ...store.keys import result_key
from .config import FixConfig

RENDER_KIND = "fix-render"


def text_to_image(generator: Any) -> Any:
    """The text-to-image model behind an injected generator, or a clear refusal (a built-in condition source such
    as 'digits' renders no sentence)."""
    for candidate in (generator, getattr(generator, "model", None)):
        if candidate is not None and callable(getattr(candidate, "generate", None)):
            return candidate
    raise ConfigError("Rendering the failure mode's sentence needs a text-to-image model.",
                      hint="Give a catalog generator (--generator flux-schnell, or t2i:ID in the app).")


def prompts(config: FixConfig) -> dict[str, str]:
    """{affected class: the prompt rendered for it}."""
    sentence = config.sentence.strip()
    classes = config.affected
    if not classes:
        raise ConfigError("A rendered sentence is labelled with the affected class it describes; none was given.",
                          hint="Give --affected-classes.")
    if "{class}" in sentence:
        return {c: sentence.replace("{class}", c) for c in classes}
    if len(classes) > 1:
        raise ConfigError("The sentence names no class, but the fix concerns several affected classes.",
                          hint="Write {class} in the sentence where the class name goes (it is rendered once per "
                               "class), or give one affected class.")
    return {classes[0]: sentence}


def _identity(model: Any) -> dict[str, Any]:
    info = getattr(model, "info", None)
    return {"id": getattr(info, "model_id", type(model).__name__), "revision": getattr(info, "revision", None),
            "settings": (getattr(info, "extra", None) or {}).get("settings")}


def _rendered(model: Any, prompt: str, n: int, seed: int, store: Any, ctx: JobContext) -> list[Image.Image]:
    key = result_key(RENDER_KIND, prompt=prompt, generator=_identity(model), seed=seed, n=n)
    if store is not None:
        hit = store.get(key)
        if hit is not None and all(f"image_{i}" in hit.artifacts for i in range(n)):
            return [hit.load_image(f"image_{i}").convert("RGB") for i in range(n)]
    images = [im.convert("RGB") for im in model.generate(prompt, n=n, seed=seed,
                                                         on_step=lambda i, total=None: not ctx.cancelled)]
    if len(images) != n:
        raise ConfigError(f"The text-to-image model returned {len(images)} image(s) for {n}.")
    if store is not None:
        store.put(key, RENDER_KIND, {"prompt": prompt, "seed": seed, "n": n},
                  artifacts={f"image_{i}": im for i, im in enumerate(images)})
    return images


def rendered_data(class_names: list[str], config: FixConfig, generator: Any, store: Any, ctx: JobContext) \
        -> tuple[list[tuple[Image.Image, int]], list[dict[str, Any]]]:
    """(rendered images with their affected class's label, one source record per class with its count)."""
    model = text_to_image(generator)
    wanted = prompts(config)
    extra: list[tuple[Image.Image, int]] = []
    sources = []
    for done, (name, prompt) in enumerate(wanted.items()):
        if name not in class_names:
            raise ConfigError(f"'{name}' is not a class of the classifier.")
        ctx.check_cancelled()
        ctx.progress("Rendering the sentence", done, len(wanted))
        images = _rendered(model, prompt, config.per_class, config.seed * 1_000_003 + done, store, ctx)
        extra += [(im, class_names.index(name)) for im in images]
        sources.append({"source": "text-to-image", "direction": "true-label", "class": name, "count": len(images),
                        "sentence": config.sentence, "prompt": prompt, "generator": _identity(model)})
    ctx.progress("Rendering the sentence", len(wanted), len(wanted))
    return extra, sources
