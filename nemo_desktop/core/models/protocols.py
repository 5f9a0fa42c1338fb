"""Small protocols that every backend satisfies, so methods take their components by injection.

A method (SciTX, a baseline, the benchmark runner) receives a Classifier, a MultimodalLLM and an
ImageEditor as plain objects. Local transformers/timm/diffusers adapters, an OpenAI-compatible endpoint,
a user's own model, or a test double all plug in, as long as they have these attributes and methods.
Images are always PIL images in RGB mode; probabilities and embeddings are numpy float32 arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence, Union, runtime_checkable

import numpy as np
from PIL import Image

# A chat message's content: text and images interleaved, in order.
ContentPart = Union[str, Image.Image]


@dataclass
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: list[ContentPart] = field(default_factory=list)

    @classmethod
    def user(cls, *parts: ContentPart) -> "ChatMessage":
        return cls("user", list(parts))

    @classmethod
    def system(cls, text: str) -> "ChatMessage":
        return cls("system", [text])


class Reply(str):
    """A chat reply: its text (a `str`, so every caller that wants only the text keeps working) plus how the
    generation ended, which the text alone cannot tell. `finish_reason`: "stop" (the model ended its answer),
    "length" (it hit max_new_tokens: the text is cut short), another server word ("content_filter"...), or None
    (not known: a user's own adapter, a server that does not say). `completion_tokens`: tokens generated, or
    None. String operations (strip, slicing) return plain `str`: the record goes with the reply as returned."""

    finish_reason: str | None
    completion_tokens: int | None

    def __new__(cls, text: str, finish_reason: str | None = None, completion_tokens: int | None = None) -> "Reply":
        self = super().__new__(cls, text)
        self.finish_reason = finish_reason
        self.completion_tokens = completion_tokens
        return self

    def __reduce__(self):  # pickled to and from worker processes with its record
        return (Reply, (str(self), self.finish_reason, self.completion_tokens))


def stopped_at_limit(reply: Any, max_new_tokens: int) -> bool:
    """Whether `reply` ended because it reached the token limit: finish_reason "length", or, where the
    finish is not known, as many completion tokens as the limit. Plain strings: not known, False."""
    finish = getattr(reply, "finish_reason", None)
    if finish is not None:
        return finish == "length"
    tokens = getattr(reply, "completion_tokens", None)
    return tokens is not None and tokens >= max_new_tokens


@dataclass(frozen=True)
class ModelInfo:
    """What identifies a loaded model in cache keys and reproducibility manifests."""

    model_id: str  # catalog id or "<family>:<repo-or-path>"
    family: str  # registry family, e.g. "timm", "hf-clip", "transformers-mllm", "openai-compatible"
    revision: str | None = None  # commit hash / tag / file hash: anything that pins the weights
    extra: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Classifier(Protocol):
    info: ModelInfo
    class_names: Sequence[str]
    zero_shot: bool  # True for CLIP/SigLIP-style classifiers whose classes are text prompts

    def predict_proba(self, images: Sequence[Image.Image], *,
                      class_prompts: Mapping[int, str] | None = None) -> np.ndarray:
        """(N, C) class probabilities. `class_prompts` replaces the prompt of the given class indices for
        this call only (zero-shot classifiers; ordinary classifiers raise if it is given)."""

    def embed(self, images: Sequence[Image.Image]) -> np.ndarray:
        """(N, D) L2-normalised features in the classifier's own feature space (used for retrieval).

        NEMO's adapters also offer `predict_with_embeddings(images) -> (probs, embeddings)` from one forward
        pass, and, for the input pipeline, `prepare_batch` / `to_device` / `outputs_from_pixels`; both are
        optional here (models/outputs.py falls back to the two calls), so a user's own classifier still plugs in."""

    def preprocess(self, images: Sequence[Image.Image]) -> Any:
        """A batch tensor on the model's device, ready for `forward_logits`."""

    def forward_logits(self, pixel_values: Any) -> Any:
        """Differentiable forward pass: (N, C) logits as a torch tensor (used by Grad-CAM)."""


@runtime_checkable
class ZeroShotClassifier(Classifier, Protocol):
    def class_prompt(self, index: int) -> str:
        """The prompt text currently used for class `index` (templates filled with its name)."""


@runtime_checkable
class MultimodalLLM(Protocol):
    info: ModelInfo

    def chat(self, messages: Sequence[ChatMessage], *, max_new_tokens: int = 512, temperature: float = 0.0,
             seed: int | None = None, top_p: float | None = None, top_k: int | None = None,
             min_p: float | None = None) -> str:
        """One conversation in, the assistant's reply text out (NEMO's adapters return a `Reply`, which says
        whether the text was cut at the token limit; a plain `str` is accepted). temperature 0 =
        greedy/deterministic, and top_p/top_k/min_p are ignored. With temperature > 0 every sampling field is
        applied explicitly: one left None takes this project's default (models/sampling.py), never the
        checkpoint's or server's."""

    def chat_batch(self, conversations: Sequence[Sequence[ChatMessage]], *, max_new_tokens: int = 512,
                   temperature: float = 0.0, seed: int | None = None, top_p: float | None = None,
                   top_k: int | None = None, min_p: float | None = None) -> list[str]:
        """Several independent conversations; replies in the same order.

        NEMO's adapters also offer `chat_requests(requests: Sequence[ChatRequest]) -> list[str]`: several
        conversations, each with its own settings (a greedy draw next to seeded ones), sent at once (one
        generate() batch locally, concurrent requests to a server). It is optional here: models/requests.py
        falls back to `chat_batch` or to one `chat` call per request, so a user's own MLLM still plugs in."""


@dataclass(frozen=True)
class ChatRequest:
    """One conversation and the settings of its reply, for `chat_requests` (see MultimodalLLM.chat_batch)."""

    messages: Sequence[ChatMessage]
    max_new_tokens: int | None = None
    temperature: float = 0.0
    seed: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None

    def chat_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `MultimodalLLM.chat` for this request (sampling fields only when set, so an
        MLLM whose `chat` takes only temperature and seed still works)."""
        kw: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                              "seed": self.seed}
        kw.update({k: v for k, v in (("top_p", self.top_p), ("top_k", self.top_k), ("min_p", self.min_p))
                   if v is not None})
        return kw


StepCallback = Callable[[int, int], bool]  # (step, total) -> False to stop (cancel)


@runtime_checkable
class ImageEditor(Protocol):
    info: ModelInfo

    def edit(self, image: Image.Image, instruction: str, *, seed: int = 0, steps: int | None = None,
             guidance: float | None = None, size: tuple[int, int] | None = None,
             on_step: StepCallback | None = None) -> Image.Image:
        """Apply a natural-language edit. `size` (width, height) is honoured exactly (default: the input's
        size). `on_step` is called after every denoising step; returning False cancels (JobCancelled).
        An editor may also offer `preferred_size(width, height) -> (w, h)`, its preferred working resolution
        for an input of that shape; callers then edit at that size by default (methods/intervention.py).

        Optional batches (same keyword arguments as `edit`; methods/intervention.py uses them when present and
        otherwise calls `edit` once per edit): `edit_batch(image, instructions: list[str]) -> list[Image]`,
        several instructions on one image, and `edit_images(images: list[Image], instruction) -> list[Image]`,
        one instruction on several images (resized to `size`, which images of different sizes need); each
        result, in order, is what `edit` gives for that instruction / image with the same seed (up to batched
        float rounding). `edit_batch_capacity(size) -> int`: how many edits at that working size fit in one
        call now (free GPU memory)."""
