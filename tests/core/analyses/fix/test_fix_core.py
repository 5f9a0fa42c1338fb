"""Issue 29, the fix loop's core: training modes, paired figures and the guard, the planted-shortcut world (right
explanation vs control), resume after a cancel, and the original model left untouched."""
from __future__ import annotations

import numpy as np
import pytest

from fix_tiny_world import fix_world_module, tiny_world
from nemo_desktop.core.analyses.fix import FixConfig
from nemo_desktop.core.analyses.fix import measure
from nemo_desktop.core.analyses.fix.training import finish, prepare
from nemo_desktop.core.base.errors import ConfigError, JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.registry import Components, build_analysis

FAST = {"per_class": 100, "epochs": 10, "patience": 3, "lr": 3e-3, "bootstrap": 200, "save": False}


@pytest.fixture(scope="module")
def world():
    return tiny_world()


def _fix(world, store=None, ctx=None, **options):
    editor = fix_world_module().FixWorldEditor(world)
    analysis = build_analysis("fix", Components(classifier=world.classifier, editor=editor, store=store),
                              {**FAST, **world.finding(), **options})
    return analysis(world.data(), ctx or JobContext()), editor


def test_defaults_are_valid_and_a_plan_without_an_edit_is_refused():
    FixConfig()
    with pytest.raises(ConfigError, match="needs the edit"):
        FixConfig(data="edit", affected_classes="one").check_plan()
    with pytest.raises(ConfigError, match="predicted classes"):
        FixConfig(instruction="Remove it", affected_classes="one").check_plan()
    with pytest.raises(ConfigError, match="Unknown mode"):
        FixConfig(mode="everything")
    FixConfig(data="augment", affected_classes="one").check_plan()


def test_training_modes_move_what_they_say(world):
    import copy

    base = world.classifier.model
    total = sum(p.numel() for p in base.parameters())
    head = sum(p.numel() for p in base.head.parameters())
    block = sum(p.numel() for p in base.features[10].parameters())
    m, info = prepare(copy.deepcopy(base), "head")
    assert info["trainable"] == head and info["head"] == "head"
    m, info = prepare(copy.deepcopy(base), "last-block")
    assert info["block"] == "features.10" and info["trainable"] == head + block
    m, info = prepare(copy.deepcopy(base), "full")
    assert info["trainable"] == total
    m, info = prepare(copy.deepcopy(base), "lora", lora_rank=2)
    assert head < info["trainable"] < total and info["lora_targets"] == 4  # 3 convs + the 288->64 linear
    merged = finish(m, "lora")
    assert set(merged.state_dict()) == set(base.state_dict())  # LoRA merged: the base architecture again


def test_paired_bootstrap_and_the_guard():
    before = np.zeros(50, bool)
    after = np.ones(50, bool)
    p = measure.paired(before, after, resamples=200, seed=0)
    assert p["n"] == 50 and p["change"] == 100.0 and p["ci"] == [100.0, 100.0]
    assert p["gained"] == 50 and p["lost"] == 0
    mixed = measure.paired(np.array([1, 1, 1, 0, 0, 1], bool), np.array([1, 0, 0, 1, 0, 1], bool), resamples=100,
                           seed=0)
    assert (mixed["gained"], mixed["lost"]) == (1, 2) and mixed["change"] == pytest.approx(-100 / 6)
    labels = np.array([0] * 100 + [1] * 100)
    same = labels.copy()
    hurt = labels.copy()
    hurt[100:110] = 0  # class 1 loses 10 of its 100 images: -5 points overall
    affected = measure.measure_set(np.zeros(40, int), np.ones(40, int), np.zeros(40, int), ["a", "b"],
                                   resamples=200, seed=0)
    keep = measure.guard(affected, measure.measure_set(labels, same, same, ["a", "b"], resamples=200, seed=0), 1.0)
    assert keep["verdict"] == "keep"
    bad = measure.guard(affected, measure.measure_set(labels, same, hurt, ["a", "b"], resamples=200, seed=0), 1.0)
    assert bad["verdict"] == "reject-regression" and {r["set"] for r in bad["regressions"]} == {
        "everything else", "class b"}
    assert measure.guard(affected, measure.measure_set(labels, same, hurt, ["a", "b"], resamples=200, seed=0),
                         6.0)["verdict"] == "reject-regression"  # class b: -10 points, beyond 6
    none = measure.measure_set(np.zeros(40, int), np.ones(40, int), np.ones(40, int), ["a", "b"], resamples=200,
                               seed=0)
    assert measure.guard(none, measure.measure_set(labels, same, same, ["a", "b"], resamples=200, seed=0),
                         1.0)["verdict"] == "reject-no-gain"


def _flips(n, gained=0, lost=0, label=0):
    """Correct before / after for n images of one class: `gained` wrong -> right, `lost` right -> wrong."""
    before, after = np.ones(n, bool), np.ones(n, bool)
    before[:gained], after[gained:gained + lost] = False, False
    labels = np.full(n, label)
    return labels, np.where(before, labels, 1 - labels), np.where(after, labels, 1 - labels)


def _set(*classes):
    labels, b, a = (np.concatenate(v) for v in zip(*classes))
    return measure.measure_set(labels, b, a, ["a", "b"], resamples=1000, seed=0)


def test_the_guard_flags_a_class_only_for_a_clear_drop_beyond_the_margin():
    """Issue 42 §7: a class drop that is significant but smaller than the margin is no regression (a flipped sign
    of the margin would reject it); a drop beyond the margin whose interval reaches zero is none either."""
    gain = _set(_flips(200, gained=100))
    small = _set(_flips(1000), _flips(1000, lost=5, label=1))  # class b: -0.5 points, interval below zero
    c = small["per_class"]["b"]
    assert c["change"] == pytest.approx(-0.5) and c["ci"][1] < 0 and -1.0 < c["change"]
    verdict = measure.guard(gain, small, 1.0)
    assert verdict["verdict"] == "keep" and verdict["regressions"] == [], verdict
    noisy = _set(_flips(1000), _flips(10, lost=1, label=1))  # class b: -10 points of 10 images, interval to 0
    assert noisy["per_class"]["b"]["ci"][1] == 0
    assert measure.guard(gain, noisy, 1.0)["verdict"] == "keep"
    beyond = _set(_flips(3000), _flips(1000, lost=30, label=1))  # class b -3 points, clear; overall -0.75
    bad = measure.guard(gain, beyond, 1.0)
    assert bad["verdict"] == "reject-regression" and bad["decided_by"] == ["margin"]
    assert [r["set"] for r in bad["regressions"]] == ["class b"]


def test_the_guard_counts_a_gain_only_when_its_whole_interval_is_above_zero_and_it_reaches_the_minimum():
    """Issue 42 §6/§7: a gain whose interval straddles zero is no gain (counting the upper end alone would keep
    it); a clear gain below the minimum is rejected by the minimum; the verdict names the threshold that decided."""
    rest = _set(_flips(500), _flips(500, label=1))
    straddle = _set(_flips(40, gained=3, lost=2))  # +2.5 points, the interval reaches below zero
    a = straddle["overall"]
    assert a["change"] == pytest.approx(2.5) and a["ci"][0] < 0 < a["ci"][1]
    v = measure.guard(straddle, rest, 1.0, min_gain=0.0)
    assert v["verdict"] == "reject-no-gain" and not v["keep"] and v["decided_by"] == ["interval"]
    small = _set(_flips(200, gained=10))  # +5 points, clearly above zero
    assert small["overall"]["ci"][0] > 0
    v = measure.guard(small, rest, 1.0, min_gain=10.0)
    assert v["verdict"] == "reject-small-gain" and not v["keep"] and v["decided_by"] == ["min_gain"]
    assert "below the 10-point minimum gain" in v["why"] and v["min_gain"] == 10.0
    v = measure.guard(small, rest, 1.0, min_gain=4.0)
    assert v["keep"] and "at least the 4-point minimum gain" in v["why"]


def test_the_minimum_gain_is_a_setting_with_a_flag():
    from nemo_desktop.core.registry.params import config_params

    assert FixConfig().min_gain == 10.0
    assert "min_gain" in {p.name for p in config_params(FixConfig)}
    with pytest.raises(ConfigError):
        FixConfig(min_gain=-1.0)


def test_the_plan_says_what_trains_and_how_a_kept_fix_is_saved(world):
    """Issue 42 §6: which block "last block" resolves to, and, before the run, that a classifier outside timm's
    family is saved as weights without a catalog entry."""
    editor = fix_world_module().FixWorldEditor(world)
    analysis = build_analysis("fix", Components(classifier=world.classifier, editor=editor),
                              {**FAST, **world.finding(), "save": True})
    plan = analysis.plan()
    assert (plan["mode"], plan["head"], plan["block"]) == ("last-block", "head", "features.10")
    assert plan["save"]["form"] == "weights"
    lines = analysis.plan_lines()
    assert lines[0] == "Plan: last-block trains the head (head) and the last block (features.10)."
    assert "the fixed weights only" in lines[1] and "no catalog entry" in lines[1]


def test_a_kept_fix_of_a_torch_classifier_outside_timm_keeps_its_weights(world):
    """Issue 42 §6: a kept fix of a non-timm classifier used to be measured and thrown away; its weights are now
    written (safetensors state dict, classes, lineage) and load back into the same architecture."""
    import copy

    import torch
    from safetensors.torch import load_file

    from nemo_desktop.core.analyses.fix.saving import save_fixed

    fixed = copy.deepcopy(world.classifier.model)
    with torch.no_grad():
        fixed.head.bias.add_(1.0)
    lineage = {"key": "w" * 64, "config": {"mode": "head", "data": "edit"}, "summary": "test"}
    saved = save_fixed(world.classifier, fixed, "world-fix", lineage, JobContext())
    assert saved["id"] is None and saved["form"] == "weights" and saved["bytes"] > 0
    again = copy.deepcopy(world.classifier.model)
    again.load_state_dict(load_file(saved["weights"]))
    assert torch.equal(again.head.bias, fixed.head.bias)
    from pathlib import Path

    folder = Path(saved["folder"])
    assert (folder / "classes.txt").read_text().split() == list(world.classifier.class_names)
    assert save_fixed(world.classifier, fixed, "world-fix", lineage, JobContext()) == saved  # a re-run finds it
    with pytest.raises(ConfigError, match="holds another model"):
        save_fixed(world.classifier, fixed, "world-fix", {**lineage, "key": "x" * 64}, JobContext())


def test_the_right_explanation_fixes_the_shortcut_and_the_control_does_not(world):
    right, editor = _fix(world, mode="full")
    control, _ = _fix(world, mode="full", data="augment")
    a = right.affected["overall"]
    assert a["before"] < 0.65 and a["n"] == len(world.affected)
    assert a["change"] >= 30, right.summary()
    assert control.affected["overall"]["change"] <= a["change"] - 15, control.summary()
    assert right.guard["keep"] and right.guard["decided_by"] == ["interval", "min_gain", "margin"], right.guard
    assert right.manifest["plan"][0] == "Plan: full trains every weight."  # the plan, recorded with the result
    assert control.guard["verdict"] in ("reject-no-gain", "reject-small-gain"), control.guard  # the control's own
    # the same plan: the same images and count, only the treatment differs
    assert [(s["class"], s["count"]) for s in right.sources] == [(s["class"], s["count"]) for s in control.sources]
    assert {s["source"] for s in right.sources} == {"edit:remove", "edit:add"}
    assert sum(s["count"] for s in right.sources) == right.data["targeted"] == len(editor.calls)


def test_the_original_model_is_not_changed(world):
    before = {k: v.clone() for k, v in world.classifier.model.state_dict().items()}
    _fix(world, mode="full", epochs=1)
    after = world.classifier.model.state_dict()
    assert all(np.array_equal(before[k].numpy(), after[k].numpy()) for k in before)


def test_a_cancelled_fix_resumes_from_its_last_checkpoint(world, store):
    options = {"mode": "last-block", "epochs": 3, "patience": 0, "per_class": 20}
    token = CancelToken()
    n_steps = []

    def on_progress(p):
        if p.stage == "Training":
            n_steps.append(p.done)
            if len(n_steps) == 30:  # in the second epoch (22 steps each)
                token.cancel()

    with pytest.raises(JobCancelled):
        _fix(world, store, JobContext(on_progress=on_progress, cancel=token), **options)
    resumed, editor = _fix(world, store, **options)
    assert resumed.training["resumed_from_epoch"] == 1
    assert len(editor.calls) == 0  # the edits were stored by the first run
    uninterrupted, _ = _fix(world, None, **options)
    assert uninterrupted.training["resumed_from_epoch"] is None
    assert resumed.training["history"] == uninterrupted.training["history"]
    assert resumed.affected == uninterrupted.affected and resumed.rest == uninterrupted.rest


def test_the_report_section_shows_the_figures_and_the_verdict(world, store):
    from nemo_desktop.core.reports import render
    from nemo_desktop.core.reports.sections import stored_result_report

    result, _ = _fix(world, store, mode="head", epochs=1, per_class=5)
    doc = stored_result_report(store.get(result.key), store)
    html = render(doc, "html").decode("utf-8")
    a = result.affected["overall"]
    assert "Before and after" in html and "Data plan" in html
    assert f"{a['change']:+.1f} ({a['ci'][0]:+.1f} to {a['ci'][1]:+.1f})" in html and f">{a['n']}<" in html
    assert "Images gained / lost" in html and f">{a['gained']} / {a['lost']}<" in html
    assert f"moving average over about 3 epoch(s) (EMA decay {result.training['average_decay']:.4f}" in html
    assert result.guard["why"].split(";")[0].replace("'", "&#x27;") in html
    assert render(doc, "pdf").startswith(b"%PDF")


def test_a_failure_modes_own_images_are_a_recorded_source(world):
    data = world.data()
    data.finding = list(world.affected[:12])  # the mode's images with their true labels
    editor = fix_world_module().FixWorldEditor(world)
    options = {**FAST, "mode": "head", "epochs": 1, "data": "edit", "affected_classes": "", "predicted_classes": ""}
    result = build_analysis("fix", Components(classifier=world.classifier, editor=editor), options)(data, JobContext())
    assert result.data["targeted"] == 12 and not editor.calls  # no edit asked for: only the mode's images
    assert {s["source"] for s in result.sources} == {"finding-images"}
    assert sum(s["count"] for s in result.sources) == 12
    with pytest.raises(ConfigError, match="needs the edit"):
        build_analysis("fix", Components(classifier=world.classifier, editor=editor), options)(world.data(),
                                                                                              JobContext())


def _kl_to_original(world, preserve):
    """Mean KL(original || fixed) on the original training images after a head fix from the finding's edits."""
    import copy

    import torch

    from nemo_desktop.core.analyses.fix.data import image_label_lists, targeted_data
    from nemo_desktop.core.analyses.fix.training import teacher_logits, train

    cfg = FixConfig(**{**FAST, **world.finding(), "per_class": 20, "epochs": 3, "patience": 0, "mode": "full",
                       "preserve": preserve})
    data = world.data()
    extra, _ = targeted_data(data, cfg, fix_world_module().FixWorldEditor(world), None, JobContext())
    images, labels = image_label_lists(data.train + extra)
    x = world.classifier.preprocess(images)
    y = torch.as_tensor(labels)
    base = world.classifier.model
    original = torch.arange(len(y)) < len(data.train)
    teacher = teacher_logits(base, x)
    torch.manual_seed(0)
    module, _ = prepare(copy.deepcopy(base), "full")
    train(module, x, y, cfg, checkpoint=None, key="k", ctx=JobContext(), teacher=teacher, original=original)
    out = teacher_logits(finish(module, "full"), x[original])
    p = torch.softmax(teacher[original], 1)
    return float((p * (torch.log_softmax(teacher[original], 1) - torch.log_softmax(out, 1))).sum(1).mean())


def test_the_preservation_term_keeps_the_original_outputs_on_the_training_images(world):
    assert _kl_to_original(world, preserve=10.0) < 0.5 * _kl_to_original(world, preserve=0.0)


def test_weight_interpolation_is_chosen_on_the_held_out_split_and_recorded(world):
    from nemo_desktop.core.analyses.fix.training import MIXES, _mix

    result, _ = _fix(world, mode="head", interpolation="held-out", epochs=2, patience=0)
    mixing = result.training["interpolation"]
    assert mixing["mix"] in MIXES and [r["mix"] for r in mixing["tried"]] == list(MIXES)
    assert mixing["n_original"] + mixing["n_targeted"] == result.training["n_val"]
    assert result.manifest["preservation"] == {"preserve": 10.0, "interpolation": "held-out", "mix": mixing["mix"],
                                               "average_epochs": 3.0,
                                               "average_decay": result.training["average_decay"]}
    floor = mixing["tried"][0]["original_accuracy"] - result.config["margin"] / 100
    allowed = [r for r in mixing["tried"] if r["original_accuracy"] >= floor - 1e-9]
    assert mixing["mix"] in {r["mix"] for r in allowed}  # the guard's rule on the held-out split
    best = max(r["targeted_accuracy"] for r in allowed)
    assert mixing["mix"] == min(r["mix"] for r in allowed if r["targeted_accuracy"] == best)
    import torch

    a, b = {"w": torch.zeros(2)}, {"w": torch.ones(2)}
    assert torch.allclose(_mix(a, b, 0.3)["w"], torch.full((2,), 0.3))


def test_the_fixed_weights_are_the_moving_average_of_the_trained_ones(world):
    """With averaging, the kept weights are the exponential moving average of the weights after every step (decay
    1 - 1 / (average_epochs x steps per epoch)), computed here independently from the same run without averaging."""
    import copy

    import torch

    from nemo_desktop.core.analyses.fix.training import train

    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(60, 3, 28, 28, generator=g), torch.randint(0, 10, (60,), generator=g)

    def run(average_epochs, on_step=None):
        module, _ = prepare(copy.deepcopy(world.classifier.model), "head")
        cfg = FixConfig(mode="head", epochs=2, patience=0, batch_size=16, lr=1e-2, preserve=0.0,
                        average_epochs=average_epochs)
        ctx = JobContext(on_progress=lambda p: on_step(module) if on_step and p.stage == "Training" else None)
        record = train(module, x, y, cfg, checkpoint=None, key="k", ctx=ctx)
        return module.head.weight.detach().clone(), record

    trajectory = []
    raw, plain = run(0.0, lambda m: trajectory.append(m.head.weight.detach().clone()))
    assert plain.average_decay is None and len(trajectory) == plain.steps == 8  # 51 training images, 4 steps each
    averaged, record = run(1.0)
    decay = 1 - 1 / (1.0 * 4)  # 0.75: not 0.5, where decay and 1 - decay are the same
    assert record.average_decay == pytest.approx(decay)
    expected = trajectory[0]
    for w in trajectory[1:]:
        expected = decay * expected + (1 - decay) * w
    assert torch.allclose(averaged, expected, atol=1e-6)
    assert not torch.allclose(averaged, raw, atol=1e-4)  # the average, not the last step's weights


def test_the_average_holds_only_what_trains(world):
    """A head fix of a large backbone keeps no second copy of the frozen weights: the average holds the head's
    weights and the buffers, nothing else."""
    import copy

    from nemo_desktop.core.training import WeightAverage  # the shared training loop's average (issue 41)

    module, _ = prepare(copy.deepcopy(world.classifier.model), "head")
    average = WeightAverage(10)
    average.update(module)
    params = {k for k, p in module.named_parameters()}
    held = set(average.values) & params
    assert held == {k for k in params if k.startswith("head.")}
    assert set(average.values) - params == {k for k, _ in module.named_buffers()}
