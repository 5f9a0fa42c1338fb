"""Issue 45: known-cause worlds of real photograph patches (benchmarks/photo_worlds.py), a fast subset of
`benchmarks/known_causes.py --worlds photos`: an image-quality cause (blur) whose restoring edit must be
recovered, and the noise and no-op editors, which must never be selected."""
from __future__ import annotations

import pytest

from benchmark_modules import benchmark_module as _module  # tests/core/methods: pytest puts it on sys.path

W = _module("known_cause_worlds")
P = _module("photo_worlds")
K = _module("known_causes")
SAMPLES = 3


@pytest.fixture(scope="module")
def blur_world():
    return P.build_world("blur", max_samples=SAMPLES)


def test_six_photo_mechanisms_split_into_a_development_and_a_held_out_half():
    assert set(P.CAUSES) == {c for half in P.HALVES.values() for c in half} and len(P.CAUSES) == 6
    assert not set(P.HALVES["development"]) & set(P.HALVES["held out"])
    assert len({c.shortcut_class for c in P.CAUSES.values()}) == 6


def test_a_restoring_edit_is_recovered_on_photographs(blur_world):
    world = blur_world
    assert world.train_accuracy > 0.8 and len(world.samples) == SAMPLES
    figures = K.evaluate_world(world, world.samples, kit=P.KIT)
    assert figures["recovery"] == 1.0 and figures["floor_violations"] == 0, figures
    assert "destroyed" not in figures["verdicts_true"]


@pytest.mark.parametrize("behaviour", ["noise", "no-op"])
def test_noise_and_no_op_never_win_on_photographs(blur_world, behaviour):
    world = blur_world
    for placement in ("one distractor", "every candidate"):
        figures = K.evaluate_adversary(world, world.samples, behaviour, placement, kit=P.KIT)
        assert figures["bad_selected"] == 0 and figures["floor_violations"] == 0, figures
