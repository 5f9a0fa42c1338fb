"""Competency in the app, offscreen, on the digits competency world (a real small CNN and an estimator fitted in
the test): competency-cf on the Analyses page with an image input and the stored-estimator picker; an image sent
there from the dataset browser; the browser's competency column scored in a job, stored, read back on reopening,
sorted least competent first and filtered."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gui


@pytest.fixture(scope="session")
def comp_world():
    import torch

    from fixtures_tiny.competency_world import build_world

    torch.set_num_threads(1)
    return build_world()


@pytest.fixture
def comp_window(make_window, comp_world, tmp_path, qtbot):
    """A window whose session holds the world's classifier, with one estimator fitted for it in the store, and a
    class-folder dataset of 8 images per class."""
    from fixtures_tiny.competency_world import TINY, write_class_folders

    from nemo_desktop.core.registry import Components, build_analysis

    window = make_window(model_process="in-process")
    window.session.put("classifier", "digits-competency", comp_world.classifier)
    folder = write_class_folders(tmp_path / "data", comp_world.fit_images, comp_world.fit_labels, 8)
    fit = build_analysis("competency-estimator", Components(classifier=comp_world.classifier,
                                                            store=window.session.store()), {**TINY, "epochs": 2})
    fitted = fit(write_class_folders(tmp_path / "fit", comp_world.fit_images, comp_world.fit_labels, 30))
    window.show()
    qtbot.waitExposed(window)
    return window, folder, fitted


def _analyses_page(qtbot, pane, name):
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == name, timeout=60000)


def test_competency_cf_runs_from_the_analyses_page_on_an_image(qtbot, comp_window, comp_world, tmp_path):
    from nemo_desktop.core.registry.methods import list_methods
    from nemo_desktop.gui.panes.analyses.plugin import NAME_ROLE

    window, _, fitted = comp_window
    pane = window.show_pane("analyses")
    pane.ensure_shown_once()
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=60000)
    listed = {pane.analysis_list.item(i).data(NAME_ROLE) for i in range(pane.analysis_list.count())}
    assert "competency-cf" in listed and not listed & set(list_methods())  # explanation methods: the workbench
    pane.select_analysis("competency-cf")
    _analyses_page(qtbot, pane, "competency-cf")
    assert pane.data_label.text() == "Image:" and pane.data_path.isVisibleTo(pane)
    fitted_box = pane._model_boxes["fitted"]
    assert fitted_box.currentData() == fitted.key and "digits" in fitted_box.currentText()
    assert set(pane._model_boxes) == {"classifier", "mllm", "fitted"}

    nine = tmp_path / "nine.png"
    comp_world.nines[0].save(nine)
    pane.data_path.setText(str(nine))
    pane.form.set_value("methods", ("reco", "lnn"))  # a multi-choice setting: check boxes
    pane.form.set_value("explain", False)
    assert pane.form.values()["methods"] == ("reco", "lnn")
    with qtbot.waitSignal(pane.sig_result_shown, timeout=120000):
        pane.run()
    result = pane.result
    assert result.analysis == "competency-cf" and [o.method for o in result.counterfactuals] == ["reco", "lnn"]
    text = pane.result_view.toPlainText()
    assert "Reco" in text and "LNN" in text and f"{result.original.competency:.3f}"[:4] in text
    out = tmp_path / "out"
    out.mkdir()
    handle = pane.export(str(out / "cf.html"))
    qtbot.waitUntil(lambda: handle.state in ("done", "failed"), timeout=60000)
    assert handle.state == "done"
    html = (out / "cf.html").read_text()
    assert html.count("data:image/png;base64") >= 3  # the original, counterfactuals and difference maps embedded


def test_dataset_browser_competency_column_and_send_to_analysis(qtbot, comp_window, comp_world, make_window,
                                                                tmp_path):
    from nemo_desktop.core.analyses.competency.score_set import CompetencyScoreSet

    window, folder, fitted = comp_window
    browser = window.show_pane("dataset_browser")
    with qtbot.waitSignal(browser.sig_opened, timeout=20000):
        browser.open_path(folder)
    controls = browser.competency
    qtbot.waitUntil(lambda: controls.estimator_key == fitted.key, timeout=20000)
    assert controls.column is None and not controls.least_first.isEnabled()

    handle = controls.score()
    # Waited on the job, not on the column signal: a stored-column lookup queued before may emit it first.
    qtbot.waitUntil(lambda: not handle.active, timeout=60000)
    assert handle.state == "done"
    data = browser.data
    assert not np.isnan(data.competency).any() and controls.column.n == len(data) == 72
    stored = window.session.store().get(controls.column.result_key)
    assert stored is not None and stored.kind == "competency-score"
    by_path = {i.path: i.score.competency for i in CompetencyScoreSet.from_dict(stored.payload).items}
    assert np.allclose(data.competency, [by_path[p] for p in data.paths], atol=1e-6)
    assert f"{len(data)} scored" in controls.status.text()

    controls.least_first.setChecked(True)
    browser.apply_filters()
    shown = data.competency[browser.grid_model.rows]
    assert len(shown) == 72 and np.all(np.diff(shown) >= 0)  # least competent first
    controls.max_spin.setValue(0.9)  # the "low competency" images only
    n = browser.apply_filters()
    assert 0 < n == int((data.competency <= 0.9).sum()) < 72
    assert np.all(data.competency[browser.grid_model.rows] <= 0.9)
    tip = browser.grid_model.data(browser.grid_model.index(0, 0), 0x03)  # ToolTipRole
    assert "Competency = " in tip and "P(in-distribution)" in tip
    from nemo_desktop.core.analyses.competency.results import LOW_PART_TEXT, low_part

    r = int(browser.grid_model.rows[0])
    part = low_part({"competency": float(data.competency[r]), "confidence": float(data.competency_parts[r, 0]),
                     "id_probability": float(data.competency_parts[r, 1])}, controls.column.threshold)
    assert tip.endswith(f": {LOW_PART_TEXT[part]} at 0.9")  # the part that is low, by the shared rule
    assert controls.column.low_text() in controls.status.text()

    # Another window (a new session on the same store): opening the dataset reads the stored column back; nothing
    # asks it to score.
    again = make_window(model_process="in-process")
    again.session.put("classifier", "digits-competency", comp_world.classifier)
    again.show()
    browser2 = again.show_pane("dataset_browser")
    with qtbot.waitSignal(browser2.sig_opened, timeout=20000):
        browser2.open_path(folder)
    qtbot.waitUntil(lambda: browser2.data.competency is not None, timeout=30000)
    assert browser2.competency.column.result_key == controls.column.result_key
    assert np.allclose(browser2.data.competency, [by_path[p] for p in browser2.data.paths], atol=1e-6)

    # One image to the competency-cf page (the right-click menu lists the image analyses).
    qtbot.waitUntil(lambda: bool(browser.image_analyses), timeout=60000)
    browser._grid_menu(browser.grid.visualRect(browser.grid_model.index(0, 0)).center())
    texts = [a.text() for a in browser._menu.actions()]
    assert "Analyse with competency-cf…" in texts and "Explain in the workbench" in texts
    browser._menu.close()
    path = str(browser.data.paths[browser.grid_model.rows[0]])
    browser.send_to_analysis("competency-cf", path)
    analyses = window.show_pane("analyses")
    _analyses_page(qtbot, analyses, "competency-cf")
    assert analyses.data_path.text() == path and analyses.chosen_data() == path

    # Another classifier loaded: the estimator is not offered for it, and the scores go.
    from dataclasses import replace

    from fixtures_tiny.competency_world import DigitsClassifier

    other_clf = DigitsClassifier(comp_world.classifier.model)
    other_clf.info = replace(comp_world.classifier.info, revision="another-revision")
    window.session.put("classifier", "other", other_clf)
    window.sig_models_changed.emit()
    qtbot.waitUntil(lambda: controls.estimator_key is None, timeout=20000)
    assert controls.column is None and browser.data.competency is None and not controls.score_button.isEnabled()
    window.session.put("classifier", "digits-competency", comp_world.classifier)
    window.sig_models_changed.emit()
    qtbot.waitUntil(lambda: browser.data.competency is not None, timeout=30000)  # read back from the store

    # Another dataset: the first one's scores are not shown for it (none of its images were scored).
    from fixtures_tiny.competency_world import write_class_folders

    other = write_class_folders(tmp_path / "other", comp_world.test_images, comp_world.test_labels, 2)
    window.show_pane("dataset_browser")
    with qtbot.waitSignal(browser.sig_opened, timeout=20000):
        browser.open_path(other)
    assert controls.column is None and browser.data.competency is None and controls.status.text() == ""


def test_competency_filter_and_order_on_the_arrays():
    """Unscored images (NaN) drop out of a competency filter and sort last; without scores the filter matches
    nothing rather than everything."""
    from nemo_desktop.core.app.dataset_browser.browse_data import BrowseData
    from nemo_desktop.gui.panes.dataset_browser.filters import FilterSpec, filter_rows

    n = 5
    data = BrowseData("/d", ["a", "b"], np.array([f"/d/{i}.png" for i in range(n)], object),
                      np.array([0, 1, 0, 1, 0]), np.full(n, -1), np.full(n, np.nan, np.float32),
                      np.full(n, np.nan, np.float32))
    assert filter_rows(data, FilterSpec(competency_max=0.5)).size == 0
    data.competency = np.array([0.9, np.nan, 0.2, 0.95, 0.4], np.float32)
    assert filter_rows(data, FilterSpec(least_competent_first=True)).tolist() == [2, 4, 0, 3, 1]
    assert filter_rows(data, FilterSpec(competency_max=0.5, least_competent_first=True)).tolist() == [2, 4]
    assert filter_rows(data, FilterSpec(true_class=0, competency_max=0.9)).tolist() == [0, 2, 4]


def test_only_estimators_of_the_loaded_classifier_are_offered(comp_window, comp_world):
    from dataclasses import replace

    from fixtures_tiny.competency_world import DigitsClassifier

    from nemo_desktop.core.app.jobs.competency_column import estimators_for

    window, _, fitted = comp_window
    store = window.session.store()
    assert [k for k, _ in estimators_for(store, comp_world.classifier)] == [fitted.key]
    other = DigitsClassifier(comp_world.classifier.model)
    other.info = replace(comp_world.classifier.info, revision="another-revision")
    assert estimators_for(store, other) == [] and estimators_for(store, None) == []


def test_the_browser_counts_low_images_by_part_at_the_columns_threshold():
    from nemo_desktop.core.app.jobs.competency_column import CompetencyColumn

    scores = {"/a.png": (0.56, 0.8, 0.7), "/b.png": (0.42, 0.6, 0.7), "/c.png": (0.36, 0.4, 0.9),
              "/d.png": (0.09, 0.3, 0.3), "/e.png": (0.98, 0.99, 0.99)}
    at_half = CompetencyColumn("est", None, 0.5, scores)
    assert at_half.low_text() == "3 below 0.5 (unsure 2, unfamiliar 1, both 1, neither part alone 1)"
    assert CompetencyColumn("est", None, 0.9, scores).low_text().startswith("4 below 0.9")
