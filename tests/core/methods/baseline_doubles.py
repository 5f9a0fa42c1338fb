"""Test doubles for the baseline tests (test code, never shipped).

PlantedSpace: a joint image-text space whose vectors the test writes down, so the answer of ErrorRetrieval
is known. BaselineDigitsMLLM: the digits world's scripted MLLM (digits_world.py) that also answers the
ChangeMLLM prompt with both of its fields, describing the inks it measures in the two images, and records
the images of every call.
"""
from __future__ import annotations

import json
import re

import numpy as np
from PIL import Image

from digits_world import HYPOTHESES, ScriptedDigitsMLLM, dominant_ink
from nemo_desktop.core.models.protocols import ModelInfo


class PlantedSpace:
    """Embedder double: texts and images map to the vectors the test chose (rows L2-normalised).

    Images are looked up by their top-left pixel colour. An unknown text or image is a test failure (so the
    test also checks exactly which sentences the method embeds)."""

    info = ModelInfo("test-double:planted-space", "test-double", "1")

    def __init__(self, texts: dict[str, list[float]], images: dict[tuple[int, int, int], list[float]]) -> None:
        self.texts = {k: _unit(v) for k, v in texts.items()}
        self.images = {k: _unit(v) for k, v in images.items()}
        self.text_calls: list[list[str]] = []
        self.image_calls = 0

    def embed(self, images):
        self.image_calls += 1
        out = []
        for im in images:
            colour = im.convert("RGB").getpixel((0, 0))
            if colour not in self.images:
                raise AssertionError(f"PlantedSpace: no vector for an image whose corner is {colour}")
            out.append(self.images[colour])
        return np.stack(out).astype(np.float32)

    def embed_texts(self, texts):
        self.text_calls.append(list(texts))
        missing = [t for t in texts if t not in self.texts]
        if missing:
            raise AssertionError(f"PlantedSpace: no vector for {missing}")
        return np.stack([self.texts[t] for t in texts]).astype(np.float32)


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


class BaselineDigitsMLLM(ScriptedDigitsMLLM):
    """ScriptedDigitsMLLM + the ChangeMLLM reply; records the images each call received."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[list[Image.Image]] = []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        parts = [p for m in messages for p in m.content]
        images = [p for p in parts if isinstance(p, Image.Image)]
        text = "\n".join(p for p in parts if isinstance(p, str))
        self.images.append(images)
        if "The second image is" in text and "cause_of_error" in text:
            self.calls.append({"text": text, "temperature": temperature, "seed": seed})
            pick = 0 if temperature == 0 else int(seed) % len(HYPOTHESES)
            inks = [dominant_ink(im) for im in images]
            return json.dumps({"visual_differences": f"The first digit is drawn in {inks[0]} ink, the second in "
                                                     f"{inks[1]} ink.", "cause_of_error": HYPOTHESES[pick]})
        return super().chat(messages, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)


GLOBAL_SUMMARIES = {
    "blue ink": "The model takes digits drawn in blue ink for eights: it relies on the ink colour, not the shape.",
    "thinner": "The model fails on digits whose strokes are thinner than usual.",
    "rotated": "The model fails on rotated digits.",
}


class GlobalDigitsMLLM(BaselineDigitsMLLM):
    """+ the global-explanation prompt: names the cause that most listed lines mention (a majority vote over
    the keywords of the scripted hypotheses), in one of GLOBAL_SUMMARIES' sentences."""

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        text = "\n".join(p for m in messages for p in m.content if isinstance(p, str))
        if '"global_explanation"' in text:
            self.calls.append({"text": text, "temperature": temperature, "seed": seed})
            items = [line for line in text.splitlines() if line.startswith("- ")]
            votes = {k: sum(k in line for line in items) for k in GLOBAL_SUMMARIES}
            best = max(votes, key=votes.get)
            return "```json\n" + json.dumps({"global_explanation": GLOBAL_SUMMARIES[best]}) + "\n```"
        return super().chat(messages, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)


class JsonWriterMLLM:
    """An MLLM double that always answers in the requested JSON (tiny random models cannot), so that the real
    tiny classifiers and editor run the counterfactual test. Records the number of images per call."""

    info = ModelInfo("test-double:json-writer", "test-double", "1")

    def __init__(self) -> None:
        self.image_counts: list[int] = []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        parts = [p for m in messages for p in m.content]
        self.image_counts.append(sum(isinstance(p, Image.Image) for p in parts))
        text = "\n".join(p for p in parts if isinstance(p, str))
        if "editing prompt" in text:
            return json.dumps({"reasoning": "-", "solution": "change the color of the background to red"})
        if "Original Failed Prompt" in text:  # the new prompt is the hypothesis itself
            hypothesis = re.search(r"Specific Hypothesis:\*\* (.*)", text).group(1)
            return json.dumps({"reasoning": "-", "solution": hypothesis})
        if "cause_of_error" in text:
            return json.dumps({"visual_differences": "colours", "cause_of_error": f"The background misleads (draw {seed})."})
        return "a small noisy picture"

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]
