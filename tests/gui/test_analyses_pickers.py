"""Issue 43 §4 and §7: an Analyses page's pickers offer only models with the capability the role needs (the
failure-modes embedder: a joint image-text model, not a plain classifier), say why Run cannot start when a typed
model lacks it, and follow the session's models when they change (a model process that restarted holds none)."""
from __future__ import annotations

from test_analyses_pane import _pane
from test_competency_gui import comp_world  # noqa: F401 - fixture
from test_gui_worker_pages import _put_in_worker, _worker_window, worker_mode  # noqa: F401 - fixture


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

    from nemo_desktop.core.app.jobs.analyses import run_problem

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


def test_pickers_follow_a_restart_of_the_model_process(qtbot, make_window, comp_world, worker_mode):  # noqa: F811
    """The real thing: the model worker holds a second classifier, model-diff's picker offers it as the current
    one; the worker restarts (a model handed over as an object cannot be loaded again) and the picker says so
    without a page switch. (The session kinds' "current (...)" rows follow the models the new process loads
    again: tests/gui/test_gui_worker_restore.py.)"""
    window = _worker_window(qtbot, make_window, worker_mode)
    _put_in_worker(qtbot, window, {"classifier_b": ("digits-b-in-worker", comp_world.classifier)})
    pane = window.show_pane("analyses")
    pane.ensure_shown_once()
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    pane.select_analysis("model-diff")
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "model-diff", timeout=60000)
    box = lambda: pane._model_boxes["classifier_b"]  # noqa: E731 - rebuilt on a change
    qtbot.waitUntil(lambda: "digits-b-in-worker" in box().itemText(0), timeout=20000)
    window.model_host.restart("a test restarts the model process")
    qtbot.waitUntil(lambda: "digits-b-in-worker" not in box().itemText(0), timeout=60000)
    assert "classifier_b" not in window.session.loaded()
