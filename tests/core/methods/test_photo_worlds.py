"""Issue 45: known-cause worlds of real photograph patches (benchmarks/photo_worlds.py), a fast subset of
`benchmarks/known_causes.py --worlds photos`: an image-quality cause (blur) whose restoring edit must be
recovered, and the noise and no-op editors, which must never be selected; a cue removed from a flat patch
(occlusion), which the reference control accepts, and the true class painted in, which it rejects."""
from __future__ import annotations

import pytest

from benchmark_modules import benchmark_module as _module  # tests/core/methods: pytest puts it on sys.path

W = _module("known_cause_worlds")
P = _module("photo_worlds")
K = _module("known_causes")
SAMPLES = 3


@pytest.fixture(scope="module")
def blur_world(tmp_path_factory):
    return K.attach_reference(P.build_world("blur", max_samples=SAMPLES), P.KIT, 0, tmp_path_factory.mktemp("blur"))


@pytest.fixture(scope="module")
def occlusion_world(tmp_path_factory):
    return K.attach_reference(P.build_world("occlusion", max_samples=SAMPLES), P.KIT, 0,
                              tmp_path_factory.mktemp("occlusion"))


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


def test_removing_a_cue_from_a_flat_patch_is_recovered_by_the_control(occlusion_world):
    """Issue 45: the grey square removed from sky or lake leaves no structure to measure ("destroyed"); the same
    edit changes nothing on references of other classes, so the control overrules the structure verdict."""
    world = occlusion_world
    figures = K.evaluate_world(world, world.samples, kit=P.KIT)
    assert figures["recovery"] == 1.0 and figures["floor_violations"] == 0, figures
    assert figures["overruled"] > 0 and figures["control_true"] < 5.0, figures
    # without the control the structure verdict stands and nothing is selected where it read "destroyed"
    mllm = P.KIT["mllm"]()
    off = [K.run_sample(world, s, P.PhotoEditor(world), mllm, None, edit_control_references=0)
           for s in world.samples]
    destroyed = [r for r in off if any(c.edit_verdict == "destroyed" and c.hypothesis == world.cause.hypothesis
                                       for c in r.candidates)]
    assert destroyed and all(r.selected_index is None for r in destroyed)


@pytest.mark.parametrize("behaviour", ["paste-true-class", "replace-by-true-class", "noise"])
def test_the_control_rejects_the_true_class_painted_in_or_noise_on_photographs(occlusion_world, behaviour):
    world = occlusion_world
    for placement in ("one distractor", "every candidate"):
        figures = K.evaluate_adversary(world, world.samples, behaviour, placement, kit=P.KIT)
        assert figures["bad_selected"] == 0 and figures["floor_violations"] == 0, figures
        if placement == "one distractor":
            assert figures["recovery"] == 1.0, figures
