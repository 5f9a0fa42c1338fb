"""`CounterfactualTester.edit_many` (issue 45): one instruction on several images, the uncached ones sent to the
editor together (`edit_images`), grouped by working size, `edits_per_call` per call, each edit cached under
`edit_one`'s unit key. The editor double edits deterministically (each pixel from the instruction and the
image), so a batched edit must equal the single one; the real adapters' batches are in
tests/core/models/test_editors.py."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.base.errors import JobCancelled, OutOfMemoryError
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.methods.intervention import (CounterfactualTester, InterventionSettings, UnitCache,
                                                    image_hash)
from nemo_desktop.core.models.protocols import ModelInfo


class OneByOneEditor:
    """An editor with `edit` only: the output is the input at `size`, shifted by the instruction's length."""

    info = ModelInfo("double:shift", "double")

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, tuple[int, int]]] = []  # (method, images, size)

    def shifted(self, image, instruction, size):
        a = np.asarray(image.convert("RGB").resize(size), dtype=np.int16)
        return Image.fromarray(((a + 7 * len(instruction)) % 256).astype(np.uint8))

    def edit(self, image, instruction, *, seed=0, steps=None, guidance=None, size=None, on_step=None):
        self.calls.append(("edit", 1, tuple(size)))
        if on_step is not None:
            on_step(1, 1)
        return self.shifted(image, instruction, tuple(size))


class BatchingEditor(OneByOneEditor):
    """... plus `edit_images` (and, when `capacity` is given, `edit_batch_capacity`)."""

    def __init__(self, capacity=None, on_batch=None) -> None:
        super().__init__()
        self.capacity, self.on_batch = capacity, on_batch
        self.asked: list[tuple[int, int]] = []

    def edit_images(self, images, instruction, *, seed=0, steps=None, guidance=None, size=None, on_step=None):
        self.calls.append(("edit_images", len(images), tuple(size)))
        if self.on_batch is not None:
            self.on_batch(len(images))
        if on_step is not None:
            on_step(1, 1)
        return [self.shifted(im, instruction, tuple(size)) for im in images]

    def edit_batch_capacity(self, size):
        self.asked.append(tuple(size))
        if self.capacity is None:
            raise AssertionError("edit_batch_size > 0: the capacity is not asked")
        return self.capacity(self)


def _images(*sizes):
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)) for w, h in sizes]


def _items(images):
    return [(im, image_hash(im)) for im in images]


def _tester(editor, batch=2, **settings):
    return CounterfactualTester(None, None, editor, settings=InterventionSettings(edit_batch_size=batch, **settings))


def _same(a, b):
    return a.size == b.size and np.array_equal(np.asarray(a), np.asarray(b))


def test_edit_many_groups_by_working_size_and_equals_edit_one(store):
    """Five images of two sizes, two per call: per size one call of two, then the rest; every result is
    edit_one's (same key: edit_one afterwards is a cache hit, the editor is not called again)."""
    images = _images((20, 10), (16, 16), (20, 10), (16, 16), (20, 10))
    editor = BatchingEditor()
    units = UnitCache(store)
    seen = []
    ctx = JobContext(on_progress=lambda p: seen.append((p.stage, p.done, p.total)))
    out = _tester(editor).edit_many(ctx, units, _items(images), "paint it red", "Reference control of hypothesis 1")
    assert sorted(editor.calls) == sorted([("edit_images", 2, (20, 10)), ("edit", 1, (20, 10)),
                                           ("edit_images", 2, (16, 16))])
    assert units.computed == 5 and len(store.find("edit")) == 5
    alone = OneByOneEditor()
    for image, got in zip(images, out):
        assert _same(got, alone.shifted(image, "paint it red", image.size))
        cached = _tester(alone).edit_one(JobContext(), UnitCache(store), image, image_hash(image), "paint it red", "s")
        assert _same(cached, got)
    assert alone.calls == []  # edit_one found every edit under its own key
    stages = list(dict.fromkeys(stage for stage, _, _ in seen))
    assert stages == ["Reference control of hypothesis 1, images 1-2/5", "Reference control of hypothesis 1, image 3/5",
                      "Reference control of hypothesis 1, images 4-5/5"]


def test_outputs_come_back_at_each_input_size(store):
    """An explicit edit size: images of different sizes share one call and come back at their own size."""
    images = _images((20, 10), (12, 30))
    editor = BatchingEditor()
    out = _tester(editor, edit_size=(24, 24)).edit_many(JobContext(), UnitCache(store), _items(images), "x", "s")
    assert editor.calls == [("edit_images", 2, (24, 24))]
    assert [o.size for o in out] == [(20, 10), (12, 30)]
    assert all(r.payload["size"] == [24, 24] for r in store.find("edit"))


def test_cache_hits_are_served_without_the_editor(store):
    images = _images((16, 16), (16, 16), (16, 16))
    first = _tester(OneByOneEditor()).edit_one(JobContext(), UnitCache(store), images[1], image_hash(images[1]),
                                               "add a hat", "s")
    editor = BatchingEditor()
    units = UnitCache(store)
    out = _tester(editor, batch=4).edit_many(JobContext(), units, _items(images), "add a hat", "s")
    assert editor.calls == [("edit_images", 2, (16, 16))] and units.reused == 1 and units.computed == 2
    assert _same(out[1], first)
    again = BatchingEditor()
    repeat = _tester(again, batch=4).edit_many(JobContext(), UnitCache(store), _items(images), "add a hat", "s")
    assert again.calls == [] and all(_same(a, b) for a, b in zip(out, repeat))
    # the same image twice is edited once
    twice = BatchingEditor()
    out = _tester(twice, batch=4).edit_many(JobContext(), UnitCache(store), _items([images[0], images[0]]),
                                            "other", "s")
    assert twice.calls == [("edit", 1, (16, 16))] and _same(out[0], out[1])


def test_edit_batch_size_zero_asks_the_editor_what_fits(store):
    """0 (automatic): asked before every call; the first edit of a size runs alone (nothing measured yet),
    then as many as fit. edits_per_call says the same to callers that chunk."""
    images = _images(*[(16, 16)] * 5)
    editor = BatchingEditor(capacity=lambda e: 1 if not e.calls else 3)
    tester = _tester(editor, batch=0)
    tester.edit_many(JobContext(), UnitCache(store), _items(images), "x", "s")
    assert editor.calls == [("edit", 1, (16, 16)), ("edit_images", 3, (16, 16)), ("edit", 1, (16, 16))]
    assert len(editor.asked) == 3 and tester.edits_per_call((16, 16), images=True) == 3


def test_an_editor_without_edit_images_gets_one_edit_per_image(store):
    images = _images((16, 16), (16, 16), (20, 10))
    editor = OneByOneEditor()
    tester = _tester(editor, batch=4)
    out = tester.edit_many(JobContext(), UnitCache(store), _items(images), "x", "s")
    assert editor.calls == [("edit", 1, (16, 16)), ("edit", 1, (16, 16)), ("edit", 1, (20, 10))]
    assert tester.edits_per_call((16, 16), images=True) == 1 and len(out) == 3


def test_a_batch_out_of_memory_is_edited_one_image_per_call(store):
    def tight(n):
        raise OutOfMemoryError("CUDA out of memory while editing.")

    images = _images(*[(16, 16)] * 3)
    editor = BatchingEditor(on_batch=tight)
    out = _tester(editor, batch=3).edit_many(JobContext(), UnitCache(store), _items(images), "x", "s")
    assert editor.calls == [("edit_images", 3, (16, 16))] + [("edit", 1, (16, 16))] * 3
    assert len(out) == 3 and len(store.find("edit")) == 3


def test_a_cancel_between_calls_stops_and_keeps_the_finished_edits(store):
    """Cancelled while the first call ran (an editor that finishes its batch): that call's edits are cached,
    no other call is made, JobCancelled is raised; a re-run edits only the rest."""
    ctx = JobContext()
    editor = BatchingEditor(on_batch=lambda n: ctx.cancel_token.cancel())
    images = _images(*[(16, 16)] * 5)
    with pytest.raises(JobCancelled):
        _tester(editor).edit_many(ctx, UnitCache(store), _items(images), "x", "s")
    assert editor.calls == [("edit_images", 2, (16, 16))] and len(store.find("edit")) == 2
    rerun = BatchingEditor()
    out = _tester(rerun).edit_many(JobContext(), UnitCache(store), _items(images), "x", "s")
    assert rerun.calls == [("edit_images", 2, (16, 16)), ("edit", 1, (16, 16))] and len(out) == 5
