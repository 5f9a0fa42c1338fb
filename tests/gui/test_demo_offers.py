"""Issue 43 §6: after the demo the welcome page no longer says nothing is here, the Analyses pages pre-fill the
open dataset (and Browse starts there), and model-diff and fix are each one button from runnable: the demo makes
the second classifier / the fix folder and fills the page."""
from __future__ import annotations

from nemo_desktop.core.demo import digits as demo
from nemo_desktop.core.demo import extras
from nemo_desktop.core.store.paths import get_paths

from demo_cache import install_built_demo


def _page(qtbot, pane, name):
    pane.select_analysis(name)
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == name, timeout=60000)
    qtbot.wait(50)


def test_the_demo_feeds_every_analysis_page(qtbot, make_window, monkeypatch):
    monkeypatch.setattr(extras, "SECOND_EPOCHS", 1)  # in-process: seconds; the product trains digits.EPOCHS
    install_built_demo(get_paths())
    window = make_window(model_process="in-process", welcome=True)
    window.resize(1280, 760)
    window.show()
    qtbot.waitExposed(window)
    fr = window.first_run
    assert "Nothing is on this computer yet" in fr.welcome.intro.text()
    with qtbot.waitSignal(fr.sig_demo_ready, timeout=300000) as ready:
        fr.welcome.demo_button.click()
    setup = ready.args[0]
    assert "Nothing is on this computer yet" not in fr.welcome.intro.text()
    assert "ready on this computer" in fr.welcome.intro.text()

    pane = window.show_pane("analyses")
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    _page(qtbot, pane, "competency-score")
    assert pane.data_path.text() == str(setup.dataset_dir)  # the open dataset, not an empty field
    assert pane.browse_start() == str(setup.dataset_dir)
    assert not pane.demo_offers.isVisible()
    _page(qtbot, pane, "competency-cf")  # an image: not pre-filled, but Browse starts in the dataset
    assert pane.data_path.text() == "" and pane.browse_start() == str(setup.dataset_dir)

    _page(qtbot, pane, "model-diff")
    assert "second classifier" in (pane.run_problem() or "").lower()
    assert pane.demo_offers.isVisible() and pane.demo_offers.button.isEnabled()
    with qtbot.waitSignal(pane.demo_offers.sig_made, timeout=300000):
        pane.demo_offers.button.click()
    assert pane.chosen_models()["classifier_b"] == extras.SECOND_CLASSIFIER_ID
    assert pane.chosen_models()["generator"] == "digits"
    problem = pane.run_problem() or ""
    assert "second classifier" not in problem.lower() and "condition" not in problem.lower(), problem
    assert ("Press Run" in pane.demo_offers.note.text()) == (pane.run_problem() is None)  # an MLLM is needed too

    _page(qtbot, pane, "fix")
    assert pane.run_problem() is not None
    with qtbot.waitSignal(pane.demo_offers.sig_made, timeout=120000) as made:
        pane.demo_offers.button.click()
    folder = made.args[1].path
    qtbot.waitUntil(lambda: pane.data_path.text() == str(folder), timeout=10000)
    assert pane.form.values()["affected_classes"] == "one, four, seven"
    assert pane.form.values()["data"] == "augment"
    assert pane.run_problem() is None and "Press Run" in pane.demo_offers.note.text()
    assert window.session.loaded()["classifier"] == demo.CLASSIFIER_ID
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=180000)
