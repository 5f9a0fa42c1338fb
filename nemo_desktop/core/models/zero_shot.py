"""Zero-shot (CLIP-style) classification shared by every vision-language adapter.

A zero-shot classifier scores an image against one text prompt per class. The prompts are the
classifier's state: `class_prompt(i)` is the text used for class i (the template filled with its name),
`set_template` / `set_class_prompt` change it, and `predict_proba(images, class_prompts={i: text})`
replaces some prompts for that one call only (the paper's counterfactual prompt intervention), leaving the
state untouched. Text embeddings are cached per prompt string.

Logits are the models' own: `scale * cos(image, text) + bias` (bias only for SigLIP-style models).
Probabilities are a softmax over the classes' logits, for CLIP and SigLIP alike:
  * CLIP was trained with a softmax over texts, so this is its native distribution.
  * SigLIP was trained with independent sigmoids: sigmoid(logit_c) is the probability that caption c
    matches, independently per class, and those numbers do not sum to 1 over a class list. NEMO needs
    one distribution over the classes (argmax prediction, the true class's probability, CEI deltas), so we
    take softmax(logits). The learned bias is the same for every class and cancels in the softmax;
    because sigmoid and softmax are both monotonic in the logit, the ranking (hence the argmax) is exactly
    the sigmoid ranking. The raw independent scores stay available as sigmoid(`logits(images)`).

Subclasses provide three tensor functions: `_host_pixels(images)` (CPU preprocessing, thread-safe: it runs in
the input pipeline's workers), `_image_features(pixel_values)` and `_text_features(prompts)` (unnormalised),
plus `logit_scale` / `logit_bias`; `input_side` (the image tower's input side) when they know it.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping, Sequence

import numpy as np

from ..base.errors import ConfigError
from .batching import batched, l2_normalize, oom_guard
from ..base.device import free_memory
from .fast_paths import FastPaths, host_to_device
from .outputs import ClassifierOutputs, softmax_np
from .protocols import ModelInfo

CLIP_TEMPLATE = "a photo of a {}."
SIGLIP_TEMPLATE = "This is a photo of {}."
_CACHE_LIMIT = 8192  # prompt embeddings kept (a 1000-class vocabulary plus many interventions)


def fill_template(template: str, name: str) -> str:
    if "{}" not in template and "{c}" not in template:
        raise ConfigError(f"The prompt template '{template}' has no '{{}}' for the class name.",
                          hint="Write the template like 'a photo of a {}.'.")
    return template.replace("{c}", "{}").format(name)


class ZeroShotClassifierBase:
    """Prompts, overrides, text-embedding cache and probabilities for CLIP-style classifiers."""

    zero_shot = True
    logit_scale: float = 1.0
    logit_bias: float | None = None
    fast: FastPaths = FastPaths()

    def __init__(self, class_names: Sequence[str], info: ModelInfo, *, device: str, dtype: Any,
                 template: str, prompts: Sequence[str] | None = None, batch_size: int = 32,
                 text_batch_size: int = 256):
        self.info = info
        self.device = device
        self.dtype = dtype
        self.batch_size = int(batch_size)
        self.text_batch_size = int(text_batch_size)
        self._text_cache: OrderedDict[str, Any] = OrderedDict()
        self._class_text = None  # (C, D) float32 unit rows for the current prompts
        self.set_class_names(class_names, template=template, prompts=prompts)

    # -- subclass hooks --------------------------------------------------------------------------------------
    def _host_pixels(self, images: Sequence[Any]):
        raise NotImplementedError

    def _image_features(self, pixel_values):
        raise NotImplementedError

    def _text_features(self, prompts: list[str]):
        raise NotImplementedError

    # -- prompt state ----------------------------------------------------------------------------------------
    @property
    def template(self) -> str:
        return self._template

    @property
    def prompts(self) -> tuple[str, ...]:
        return tuple(self._prompts)

    def class_prompt(self, index: int) -> str:
        return self._prompts[self._check_index(index)]

    def set_class_names(self, class_names: Sequence[str], *, template: str | None = None,
                        prompts: Sequence[str] | None = None) -> None:
        """Switch vocabulary (e.g. to the 200 ImageNet-R classes); prompts follow the template."""
        names = [str(n) for n in class_names]
        if not names:
            raise ConfigError("A zero-shot classifier needs at least one class name.")
        if prompts is not None and len(prompts) != len(names):
            raise ConfigError(f"{len(prompts)} prompts were given for {len(names)} classes.",
                              hint="Give exactly one prompt per class, in class order.")
        self.class_names = names
        self._template = template or getattr(self, "_template", CLIP_TEMPLATE)
        self._prompts = list(prompts) if prompts is not None else [fill_template(self._template, n) for n in names]
        self._class_text = None

    def set_template(self, template: str) -> None:
        self.set_class_names(self.class_names, template=template)

    def set_class_prompt(self, index: int, prompt: str) -> None:
        """Replace one class's prompt permanently (use `class_prompts=` for a one-call change)."""
        self._prompts[self._check_index(index)] = self._check_prompt(prompt)
        self._class_text = None

    # -- Classifier protocol ---------------------------------------------------------------------------------
    def preprocess(self, images: Sequence[Any]):
        return self.to_device(self.prepare_batch(images))

    def prepare_batch(self, images: Sequence[Any]):
        """The CPU half of preprocessing (a float tensor on the host): thread-safe, runs in loader workers."""
        batch = self._host_pixels([im if im.mode == "RGB" else im.convert("RGB") for im in images])
        return batch.pin_memory() if self.fast.pin_memory else batch

    def to_device(self, host_batch):
        return host_to_device(host_batch, self.device, self.fast).to(dtype=self.dtype)

    def forward_logits(self, pixel_values, *, class_prompts: Mapping[int, str] | None = None):
        """Differentiable (N, C) logits w.r.t. `pixel_values` (text embeddings are constants)."""
        with oom_guard(f"The classifier {self.info.model_id}"):
            image = l2_normalize(self._image_features(pixel_values))
            return self._logits_from_unit(image, self.text_embeddings(class_prompts))

    def predict_proba(self, images: Sequence[Any], *, class_prompts: Mapping[int, str] | None = None) -> np.ndarray:
        return self.probabilities_from_logits(self.logits(images, class_prompts=class_prompts))

    def embed(self, images: Sequence[Any]) -> np.ndarray:
        return self._collect(images, self.embed_from_pixels, width=0)

    def predict_with_embeddings(self, images: Sequence[Any], *,
                                class_prompts: Mapping[int, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(probabilities, unit image embeddings) from one pass of the image tower per batch."""
        if len(images) == 0:
            return np.zeros((0, len(self.class_names)), np.float32), np.zeros((0, 0), np.float32)
        text = self.text_embeddings(class_prompts)
        with oom_guard(f"The classifier {self.info.model_id}"):
            out = ClassifierOutputs.concat([self._outputs(self.preprocess(chunk), text)
                                            for chunk in batched(images, self.batch_size)], len(self.class_names))
        return out.probs, out.embeddings

    def outputs_from_pixels(self, pixel_values, *, class_prompts: Mapping[int, str] | None = None) -> ClassifierOutputs:
        """Logits, probabilities and unit image embeddings of one preprocessed batch."""
        return self._outputs(pixel_values, self.text_embeddings(class_prompts))

    # -- tensor-level entry points ---------------------------------------------------------------------------
    def logits(self, images: Sequence[Any], *, class_prompts: Mapping[int, str] | None = None) -> np.ndarray:
        text = self.text_embeddings(class_prompts)
        return self._collect(images, lambda pv: self._logits_np(pv, text), width=len(self.class_names))

    def predict_proba_from_pixels(self, pixel_values, *, class_prompts: Mapping[int, str] | None = None):
        return self.probabilities_from_logits(self._logits_np(pixel_values, self.text_embeddings(class_prompts)))

    def embed_from_pixels(self, pixel_values) -> np.ndarray:
        import torch

        with oom_guard(f"The classifier {self.info.model_id}"), torch.inference_mode():
            return l2_normalize(self._image_features(pixel_values)).cpu().numpy()

    @staticmethod
    def probabilities_from_logits(logits: np.ndarray) -> np.ndarray:
        """Softmax over classes (see the module docstring for why SigLIP uses it too)."""
        return softmax_np(logits)

    def text_embeddings(self, class_prompts: Mapping[int, str] | None = None):
        """(C, D) unit text embeddings for the current prompts, with `class_prompts` swapped in."""
        if self._class_text is None:
            self._class_text = self._embed_prompts(self._prompts)
        if not class_prompts:
            return self._class_text
        indices = [self._check_index(i) for i in class_prompts]
        texts = [self._check_prompt(class_prompts[i]) for i in class_prompts]
        swapped = self._class_text.clone()
        swapped[indices] = self._embed_prompts(texts)
        return swapped

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(N, D) float32 L2-normalised text embeddings in the image embeddings' space (cached per text)."""
        if len(texts) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        return self._embed_prompts(list(texts)).float().cpu().numpy()

    def clear_text_cache(self) -> None:
        self._text_cache.clear()
        self._class_text = None

    def unload(self) -> None:
        """Release the weights (GPU memory included); the object is unusable afterwards."""
        self.model = None
        self.clear_text_cache()
        free_memory()

    # -- internals -------------------------------------------------------------------------------------------
    def _embed_prompts(self, prompts: Sequence[str]):
        import torch

        missing = list(dict.fromkeys(p for p in prompts if p not in self._text_cache))
        # no_grad, not inference_mode: these rows are reused inside differentiable forward_logits calls.
        with oom_guard(f"The text encoder of {self.info.model_id}"), torch.no_grad():
            for chunk in batched(missing, self.text_batch_size):
                for prompt, row in zip(chunk, l2_normalize(self._text_features(list(chunk)))):
                    self._text_cache[prompt] = row
        for p in prompts:
            self._text_cache.move_to_end(p)
        rows = torch.stack([self._text_cache[p] for p in prompts])
        while len(self._text_cache) > _CACHE_LIMIT:
            self._text_cache.popitem(last=False)
        return rows

    def _logits_from_unit(self, image, text):
        logits = self.logit_scale * image @ text.to(image.device).T
        return logits + self.logit_bias if self.logit_bias is not None else logits

    def _logits_np(self, pixel_values, text) -> np.ndarray:
        import torch

        with oom_guard(f"The classifier {self.info.model_id}"), torch.inference_mode():
            image = l2_normalize(self._image_features(pixel_values))
            return self._logits_from_unit(image, text).cpu().numpy()

    def _outputs(self, pixel_values, text) -> ClassifierOutputs:
        import torch

        with oom_guard(f"The classifier {self.info.model_id}"), torch.inference_mode(), \
                self.fast.autocast(self.device):
            image = l2_normalize(self._image_features(pixel_values))
            logits = self._logits_from_unit(image, text).cpu().numpy()
        return ClassifierOutputs(logits, self.probabilities_from_logits(logits), image.cpu().numpy())

    def _collect(self, images: Sequence[Any], fn, width: int) -> np.ndarray:
        """Run `fn` on preprocessed batches of `batch_size` images; (0, width) for no images."""
        if len(images) == 0:
            return np.zeros((0, width), dtype=np.float32)
        with oom_guard(f"The classifier {self.info.model_id}"):
            parts = [fn(self.preprocess(chunk)) for chunk in batched(images, self.batch_size)]
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _check_index(self, index: int) -> int:
        i = int(index)
        if not 0 <= i < len(self.class_names):
            raise ConfigError(f"Class index {index} is out of range (the classifier has "
                              f"{len(self.class_names)} classes).")
        return i

    @staticmethod
    def _check_prompt(prompt: str) -> str:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError("A class prompt must be non-empty text.")
        return prompt

    # -- differentiable extension (competency estimation differentiates from [0, 1] pixels) ----------
    def _normalise_unit(self, x):
        import torch

        mean, std = self._unit_mean_std()
        mean = torch.tensor(mean, device=x.device, dtype=x.dtype).view(1, -1, 1, 1)
        std = torch.tensor(std, device=x.device, dtype=x.dtype).view(1, -1, 1, 1)
        return ((x - mean) / std).to(self.dtype)

    def logits_from_unit(self, x):
        """Zero-shot logits for the current class prompts, differentiable in x ([0, 1] pixels)."""
        return self.forward_logits(self._normalise_unit(x))

    def features_from_unit(self, x):
        """The image embedding (before L2 normalisation), differentiable in x."""
        from .batching import oom_guard

        with oom_guard(f"The classifier {self.info.model_id}"):
            return self._image_features(self._normalise_unit(x))

def zero_shot_class_names(options: Mapping[str, Any]) -> list[str]:
    """Class names from options (class_file / class_names / vocabulary), ImageNet-1k by default."""
    from .vocab import load_vocabulary, read_class_file

    if options.get("class_file"):
        return read_class_file(options["class_file"])
    if options.get("class_names"):
        return [str(n) for n in options["class_names"]]
    return list(load_vocabulary(options.get("vocabulary") or "imagenet-1k").names)
