"""One edit instruction on several images, batched: `CounterfactualTester.edit_many` (intervention.py).

The reference control (edit_control.py) applies a candidate's instruction to R reference images. Each edit is
`edit_one`'s unit (the same key, so a cached edit is served from the results store and a new one is stored),
but the uncached images go to the editor together: grouped by working size (one batch runs at one size) and
`tester.edits_per_call(size, images=True)` per call through `editor.edit_images` (one pass through the
denoiser for the group, each image with the generator `edit` would seed). An editor without `edit_images`
gets one `edit` call per image. A group that runs out of GPU memory is edited again one image per call.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from PIL import Image

from ..base.errors import OutOfMemoryError
from ..base.job_context import JobContext

if TYPE_CHECKING:  # intervention.py imports this module
    from .intervention import CounterfactualTester, UnitCache

log = logging.getLogger(__name__)


def at_input_size(out: Image.Image, img: Image.Image) -> Image.Image:
    """The edited image as RGB at the input's size: the classifier sees both alike."""
    out = out.convert("RGB")
    return out if out.size == img.size else out.resize(img.size, Image.Resampling.LANCZOS)


def edit_many(tester: "CounterfactualTester", ctx: JobContext, units: "UnitCache",
              items: Sequence[tuple[Image.Image, str]], instruction: str, stage: str) -> list[Image.Image]:
    """`instruction` on each (image, sha256) of `items`; the edited images in the order of `items`, each at its
    input's size. Progress: "<stage>, image i/n" or "<stage>, images i-j/n" (done/total = diffusion steps of
    that call). Raises what the editor raises (the edits finished before stay cached) and JobCancelled when
    cancelled, checked before every editor call."""
    s = tester.settings
    n = len(items)
    results: list[Image.Image | None] = [None] * n
    # unit key -> the items it answers (the same image twice is edited once), grouped by working size
    pending: dict[tuple[int, int], dict[str, list[int]]] = {}
    for i, (img, sha) in enumerate(items):
        size, _ = tester.working_size(img.size)
        key = tester._edit_key(img, sha, instruction, size)
        hit = units.get(key)
        if hit is not None:
            results[i] = hit.load_image("image").convert("RGB")
        else:
            pending.setdefault(tuple(size), {}).setdefault(key, []).append(i)
    done = sum(r is not None for r in results)
    batches = callable(getattr(tester.editor, "edit_images", None))
    for size, by_key in pending.items():
        todo = list(by_key.items())
        start, one_by_one = 0, False
        while start < len(todo):
            per_call = 1 if one_by_one or not batches else tester.edits_per_call(size, images=True)
            group = todo[start:start + per_call]
            ctx.check_cancelled()
            first, last = done + 1, done + sum(len(idx) for _, idx in group)
            if n == 1:  # the caller's stage already names the one image (the reference control's chunks)
                label = stage
            else:
                label = f"{stage}, image {first}/{n}" if first == last else f"{stage}, images {first}-{last}/{n}"
            ctx.progress(label, 0, s.edit_steps)

            def on_step(step: int, total: int, _label: str = label) -> bool:
                ctx.progress(_label, step, total)
                return not ctx.cancelled

            images = [items[idx[0]][0] for _, idx in group]
            kw = dict(seed=s.seed, steps=s.edit_steps, guidance=s.edit_guidance, size=tuple(size), on_step=on_step)
            try:
                if len(group) == 1:
                    outs = [tester.editor.edit(images[0], instruction, **kw)]
                else:
                    outs = list(tester.editor.edit_images(images, instruction, **kw))
            except OutOfMemoryError:
                if len(group) == 1:
                    raise
                # the group did not fit after all: these images, and the rest of this size, one per call
                one_by_one = True
                log.warning("a batch of %d reference edits ran out of memory; editing one at a time", len(group))
                continue
            if len(outs) != len(group) or not all(isinstance(o, Image.Image) for o in outs):
                raise TypeError(f"the editor returned {len(outs)} results of types "
                                f"{sorted({type(o).__name__ for o in outs})}, not {len(group)} PIL images")
            for (key, idx), img, out in zip(group, images, outs):
                out = at_input_size(out, img)
                tester._put_edit(units, key, items[idx[0]][1], instruction, size, img, out)
                for i in idx:
                    results[i] = out
            start += len(group)
            done = last
            ctx.progress(label, 1, 1)
            ctx.check_cancelled()  # as edit_one: a cancel during the call stops here (its edits are kept)
    return [r for r in results if r is not None]
