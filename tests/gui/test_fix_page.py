"""Issue 29 in the app: "Try a fix…" turns a validated explanation into the fix page's settings, and the fix runs
from the Analyses pane with the session's classifier and editor, showing its before/after report and verdict."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "analyses" / "fix"))

from fix_tiny_world import fix_world_module, tiny_world  # noqa: E402


def _explanation(instruction: str, cei: float = 20.0):
    from nemo_desktop.core.base.records import Candidate, ExplanationResult, SampleInfo

    sample = SampleInfo("x.png", "0" * 64, 1, "one", 7, "seven", 0.05, 0.9)
    return ExplanationResult("scitx", sample, "dark background", 0, cei,
                             [Candidate("The background is dark blue.", "image", instruction, cei=cei)])


def _write(folder: Path, split: str, items, names):
    for i, (im, y) in enumerate(items):
        d = folder / split / names[y]
        d.mkdir(parents=True, exist_ok=True)
        im.save(d / f"{i:05d}.png")


def test_fix_settings_come_from_validated_explanations_only():
    from nemo_desktop.gui.panes.workbench.fix_link import fix_settings

    s = fix_settings(_explanation("Make the background white and the digit black"))
    assert s == {"data": "edit", "instruction": "Make the background white and the digit black",
                 "affected_classes": "one", "predicted_classes": "seven", "failure_modes": "", "failure_mode": 0}
    assert fix_settings(_explanation("Make it darker", cei=-4.0)) is None


@pytest.mark.gui
def test_try_a_fix_runs_from_the_analyses_page(qtbot, make_window, tmp_path):
    from nemo_desktop.gui.panes.workbench.fix_link import try_fix

    world = tiny_world(train_size=300, epochs=4, test_size=40)
    names = world.classifier.class_names
    folder = tmp_path / "fixdata"
    _write(folder, "train", world.train, names)
    _write(folder, "affected", world.affected, names)
    _write(folder, "rest", world.rest, names)
    window = make_window(model_process="in-process")
    window.show()
    qtbot.waitExposed(window)
    window.session.put("classifier", "fix-world-cnn", world.classifier)
    window.session.put("editor", "fix-world-editor", fix_world_module().FixWorldEditor(world))
    edit = world.finding()["instruction"]
    assert try_fix(window, [_explanation(edit)])
    pane = window.show_pane("analyses")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "fix", timeout=180000)
    values = pane.form.values()
    assert values["instruction"] == edit and values["predicted_classes"] == "seven"
    assert values["affected_classes"] == "one"
    pane.data_path.setText(str(folder))
    for name, value in {"per_class": 5, "epochs": 1, "bootstrap": 100, "save": False}.items():
        pane.form.set_value(name, value)
    with qtbot.waitSignal(pane.sig_result_shown, timeout=180000):
        pane.run()
    assert pane.result.analysis == "fix" and pane.result.data["targeted"] == 5
    text = pane.result_view.toPlainText()
    assert "Before and after" in text and "Data plan" in text
    assert pane.result.guard["why"].split(";")[0] in text


@pytest.mark.gui
def test_use_the_fixed_model_loads_its_catalog_entry(qtbot, make_window, tmp_path):
    import copy

    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
    from nemo_desktop.core.analyses.fix import FixResult
    from nemo_desktop.core.analyses.fix.saving import save_fixed
    from nemo_desktop.core.base.job_context import JobContext
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

    folder = build_tiny_timm(tmp_path / "tiny", label_names=TINY_CLASSES, input_size=32)
    clf = load_model(ModelSpec(kind="classifier", family="timm", source=f"local-dir:{folder}"),
                     LoadOptions(device="cpu", dtype="float32"))
    saved = save_fixed(clf, copy.deepcopy(clf.model), "tiny-fixed", {
        "key": "f" * 64, "config": {"mode": "head", "data": "edit"}, "summary": ""}, JobContext())
    result = FixResult(config={}, classifier={"id": clf.info.model_id}, data={}, sources=[], trainable={},
                       training={}, affected={}, rest={}, guard={"verdict": "keep"}, saved=saved, manifest={})
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("analyses")
    actions = pane.fix_actions
    actions.set_result(result)
    assert actions.isVisibleTo(pane) and actions.use_button.isVisibleTo(pane)
    assert "tiny-fixed" in actions.label.text()
    handle = actions.use_fixed_model()
    qtbot.waitUntil(lambda: handle.state in ("done", "failed"), timeout=120000)
    assert handle.state == "done" and window.session.facts("classifier")["model_id"] == "tiny-fixed"  # the worker's
    actions.set_result(FixResult.from_dict({**result.to_dict(), "saved": None}))
    assert not actions.use_button.isVisibleTo(pane)
