"""Where a user looks for an analysis, a button opens its Analyses page: "Fit competency…" in the Model
manager (enabled once a classifier is loaded) opens the competency-estimator page with the current classifier."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gui


def test_fit_competency_opens_the_estimator_page(qtbot, make_window, digits_window):
    empty = make_window()
    manager = empty.show_pane("model_manager")
    assert not manager.fit_competency_button.isEnabled()  # no classifier loaded yet

    window = digits_window
    window.show()
    qtbot.waitExposed(window)
    manager = window.show_pane("model_manager")
    qtbot.waitUntil(lambda: manager.fit_competency_button.isEnabled(), timeout=30000)
    manager.fit_competency_button.click()
    pane = window.panes["analyses"]
    assert window.current_pane() is pane
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "competency-estimator", timeout=60000)
    classifier_box = pane._model_boxes["classifier"]
    assert classifier_box.currentText() == "current (digits-cnn)"
