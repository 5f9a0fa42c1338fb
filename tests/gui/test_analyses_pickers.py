"""Issue 43 §4 and §7: an Analyses page's pickers offer only models with the capability the role needs (the
failure-modes embedder: a joint image-text model, not a plain classifier), say why Run cannot start when a typed
model lacks it, and follow the session's models when they change (a model process that restarted holds none)."""
from __future__ import annotations

from test_analyses_pane import _pane


def _items(box):
    return [box.itemData(i) for i in range(box.count())]


def test_the_embedder_picker_lists_only_joint_image_text_models(qtbot, make_window):
    from nemo_desktop.core.models.catalog import ZERO_SHOT_FAMILIES, list_catalog

    window, pane = _pane(qtbot, make_window, "failure-modes")
    box = pane._model_boxes["embedder"]
    families = {e.id: e.family for e in list_catalog("classifier")}
    offered = [ref for ref in _items(box) if ref]
    assert offered and all(families[ref] in ZERO_SHOT_FAMILIES for ref in offered), offered
    plain = next(ref for ref, family in families.items() if family not in ZERO_SHOT_FAMILIES)
    assert plain not in offered

    from nemo_desktop.gui.panes.analyses.run_job import run_problem

    box.setEditText(plain)  # typed anyway: refused in place (with an index to run on), in the page's words
    assert pane.chosen_models()["embedder"] == plain
    problem = run_problem(pane.page, pane.chosen_models(), "an-index-id")
    assert problem is not None and plain in problem and "joint image-text model" in problem, problem


def test_pickers_follow_the_models_the_session_holds(qtbot, make_window):
    """The model-diff page's classifier picker names the model in memory; when the model process restarts (its
    models are gone) or a model is unloaded, it says so at once, without switching pages."""
    window, pane = _pane(qtbot, make_window, "model-diff")
    box = lambda: pane._model_boxes["classifier"]  # noqa: E731 - rebuilt on a change
    assert "digits-held" not in box().itemText(0)
    window.session.put("classifier", "digits-held", object())
    window.sig_models_changed.emit()
    qtbot.waitUntil(lambda: "digits-held" in box().itemText(0), timeout=20000)

    pane.form.set_value("seed", 5) if "seed" in pane.form.editors else None
    second = pane._model_boxes["classifier_b"]
    i = next(i for i in range(second.count()) if second.itemData(i))
    second.setCurrentIndex(i)
    picked = second.itemData(i)
    window.session.unload("classifier")  # what a restarted model process reports: nothing in memory
    window.sig_models_changed.emit()
    qtbot.waitUntil(lambda: "digits-held" not in box().itemText(0), timeout=20000)
    assert pane.chosen_models()["classifier_b"] == picked  # what the user picked stays picked
