"""Ask a multimodal LLM why the classifier is not competent on an image (seed section 4.1, appendix B).

Text: the dataset description (B.1/B.2, from the user's dataset or their own words), B.3 and the instruction (B.4
alone, B.5 with a counterfactual), joined by single spaces. Message: one user turn [image, text], no system turn (as
the reference). The caller passes the original as the classifier sees it (its input view, at the counterfactual's
size), so both halves show the same framing. With a counterfactual the image is ONE composite as the reference draws
it: a white canvas (w1 + w2 + 30) x (max h + 20), original at (10, 10), counterfactual at (w1 + 20, 10);
`composite=False` sends the two images instead. Tiny images are upscaled (nearest) first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from PIL import Image

from ...methods.prompts import load_prompt
from ...models.protocols import ChatMessage

PROMPTS = ("competency_dataset", "competency_without_counterfactual", "competency_with_counterfactual")


def prompt_versions() -> dict[str, str]:
    return {name: load_prompt(name).version for name in PROMPTS}


def dataset_description(class_names: Sequence[str], subject: str = "images", override: str = "") -> str:
    if override.strip():
        return override.strip()
    names = list(class_names)
    return load_prompt("competency_dataset").render(dataset_subject=subject, class_count=len(names),
                                                    class_list=", ".join(names))


def upscale(image: Image.Image, min_side: int) -> Image.Image:
    side = min(image.size)
    if side >= min_side:
        return image
    f = min_side / side
    return image.resize((round(image.width * f), round(image.height * f)), Image.Resampling.NEAREST)


def side_by_side(original: Image.Image, counterfactual: Image.Image) -> Image.Image:
    (w1, h1), (w2, h2) = original.size, counterfactual.size
    canvas = Image.new("RGB", (w1 + w2 + 30, max(h1, h2) + 20), (255, 255, 255))
    canvas.paste(original.convert("RGB"), (10, 10))
    canvas.paste(counterfactual.convert("RGB"), (w1 + 20, 10))
    return canvas


@dataclass
class Explainer:
    mllm: Any
    description: str
    composite: bool = True
    min_side: int = 224
    max_new_tokens: int = 100

    def messages(self, original: Image.Image, counterfactual: Image.Image | None = None) -> list[ChatMessage]:
        orig = upscale(original.convert("RGB"), self.min_side)
        if counterfactual is None:
            text = load_prompt("competency_without_counterfactual").render(dataset_description=self.description)
            return [ChatMessage.user(orig, text)]
        cf = counterfactual.convert("RGB").resize(orig.size, Image.Resampling.NEAREST)
        text = load_prompt("competency_with_counterfactual").render(dataset_description=self.description)
        if self.composite:
            return [ChatMessage.user(side_by_side(orig, cf), text)]
        return [ChatMessage.user(orig, cf, text)]

    def __call__(self, original: Image.Image, counterfactual: Image.Image | None = None) -> str:
        reply = self.mllm.chat(self.messages(original, counterfactual), max_new_tokens=self.max_new_tokens,
                               temperature=0.0)
        return (reply or "").strip()
