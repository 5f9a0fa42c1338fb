"""The fix's images, preprocessed once and held on the host; batches go to the model's device as they are used.

A fix trains on the whole original training set plus the targeted images and measures two held-out sets, every
epoch reading each image again. Preprocessed float pixels of 10,000 images at 224 x 224 are 6 GB: kept on the GPU
they would compete with the model and the optimizer. Here they stay in host memory, as uint8 when the classifier
splits its preprocessing into a host half and a device half (`prepare_batch` / `to_device`, the timm adapter's: a
quarter of the float size), and only the batch being used is on the device.

    x = Pixels.from_images(classifier, images, ctx, "Preparing training images")
    out = module(x[idx])          # idx: a slice or an index tensor on any device; the batch is on x.device
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ...base.job_context import JobContext

BATCH = 64  # images preprocessed at a time


class Pixels:
    """Indexable like a tensor of images on `device` (x[i:j], x[index_tensor], len(x)); stored on the host."""

    def __init__(self, host: Any, to_device: Callable[[Any], Any], device: Any) -> None:
        self.host, self._to_device, self.device = host, to_device, device

    @classmethod
    def from_images(cls, classifier: Any, images: Sequence[Any], ctx: JobContext, stage: str) -> "Pixels":
        import torch

        split = hasattr(classifier, "prepare_batch") and hasattr(classifier, "to_device")
        prepare = classifier.prepare_batch if split else (lambda ims: classifier.preprocess(ims).cpu())
        parts = []
        for s in range(0, len(images), BATCH):
            ctx.check_cancelled()
            parts.append(prepare(images[s:s + BATCH]))
            ctx.progress(stage, min(s + BATCH, len(images)), len(images))
        host = torch.cat(parts) if parts else torch.empty(0)
        device = next(classifier.model.parameters()).device
        to_device = classifier.to_device if split else (lambda batch: batch.to(device))
        return cls(host, to_device, device)

    def __len__(self) -> int:
        return len(self.host)

    def __getitem__(self, index: Any) -> Any:
        if hasattr(index, "device") and index.device.type != "cpu":
            index = index.cpu()
        return self._to_device(self.host[index])
