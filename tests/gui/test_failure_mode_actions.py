"""A failure-modes result on the Analyses page acts in the other panes: a mode's images fill the dataset browser's
grid (its sentence above them, "Show all images" to go back) and its misclassified images go to the workbench.
The result is a real one: the digits CNN's reference index of held-out digits in random inks, analysed with the
measured-pixels joint space of the failure-modes tests."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gui
_FM_TESTS = str(Path(__file__).resolve().parents[1] / "core" / "analyses" / "failure_modes")
if _FM_TESTS not in sys.path:
    sys.path.insert(0, _FM_TESTS)


@pytest.fixture
def fm_window(digits_window, digits, tmp_path):
    from digits_world import DigitsCNNClassifier
    from fm_digits_world import MeasuredFactorSpace, sentence_file, write_ink_manifest
    from nemo_desktop.core.analyses.failure_modes import FailureModesConfig, FailureModesPipeline
    from nemo_desktop.core.data.datasets import CsvManifestDataset
    from nemo_desktop.core.data.reference_index import build_index

    (tmp_path / "ink").mkdir()
    manifest = write_ink_manifest(tmp_path / "ink", digits)
    store, clf = digits_window.session.store(), DigitsCNNClassifier(digits[0])
    index = build_index(CsvManifestDataset(manifest), clf, store)
    cfg = FailureModesConfig(clusters=3, tau=None, split="correctness",
                             sentence_sets=(str(sentence_file(tmp_path / "s.json")),))
    result = FailureModesPipeline(clf, MeasuredFactorSpace(*digits[2]), store, cfg)(index)
    return digits_window, result, index


def _shown(qtbot, window, result):
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("analyses")
    with qtbot.waitSignal(pane.sig_result_shown, timeout=30000):
        pane._on_done(result)  # as a finished run hands it over
    return pane


def test_a_mode_filters_the_browser_grid_with_its_sentence(qtbot, fm_window):
    from nemo_desktop.core.analyses.failure_modes.members import list_modes

    window, result, index = fm_window
    pane = _shown(qtbot, window, result)
    actions = pane.failure_modes
    modes = list_modes(result)
    assert actions.isVisibleTo(pane) and actions.combo.count() == len(modes) > 0
    actions.select(len(modes) - 1)
    mode = modes[-1]
    assert actions.sentence.text() == mode.sentence
    with qtbot.waitSignal(actions.sig_sent, timeout=30000) as sent:
        actions.show_in_browser()  # the browser has nothing open: it opens the index the analysis ran on
    assert sent.args == ["browser", mode]
    browser = window.show_pane("dataset_browser")
    assert window.current_pane() is browser and browser.data.index_id == index.index_id
    shown = {str(browser.data.paths[r]) for r in browser.grid_model.rows}
    assert shown == set(mode.paths) and len(shown) == len(mode.paths)
    assert browser.mode_bar.isVisibleTo(browser)
    assert browser.mode_bar.label.text() == f"{mode.title}. {mode.sentence}"
    assert browser.count_label.text().startswith(f"{len(mode.paths):,} of {len(index):,} shown")

    # The other filters still apply inside the mode (here: only its correctly classified images).
    right = browser.set_filter(correctness="correct")
    assert right == sum(bool(index.entries.correct[r]) for r in result.groups[0].hard_clusters[-1].rows)
    browser.mode_bar.clear_button.click()
    assert not browser.mode_bar.isVisibleTo(browser) and browser.failure_mode is None
    browser.set_filter(correctness="all")
    assert browser.grid_model.rowCount() == len(index)

    # A second mode while the index is open filters at once (no job).
    actions.select(0)
    assert actions.show_in_browser() is None
    assert {str(browser.data.paths[r]) for r in browser.grid_model.rows} == set(modes[0].paths)

    # And back: "Find failure modes…" in the browser opens the analysis' page on the open dataset's index.
    assert browser.failure_modes_button.isEnabled()
    browser.failure_modes_button.click()
    assert window.current_pane() is pane
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == "failure-modes"
                    and pane.chosen_data() == index.index_id, timeout=60000)


def test_a_modes_errors_go_to_the_workbench(qtbot, fm_window):
    from nemo_desktop.core.analyses.failure_modes.members import list_modes, mode_members

    window, result, index = fm_window
    pane = _shown(qtbot, window, result)
    actions = pane.failure_modes
    mode = list_modes(result)[0]
    with qtbot.waitSignal(actions.sig_sent, timeout=30000) as sent:
        actions.explain_errors()
    assert sent.args[0] == "workbench"
    workbench = window.show_pane("workbench")
    members, _ = mode_members(mode, index)
    wrong = [m for m in members if not m.correct]
    assert len(wrong) > 0  # the correctness split: a hard cluster is misclassified images
    assert [s.path for s in workbench.samples] == [m.path for m in wrong]
    assert all(s.true_label != s.pred_label and s.index_id == index.index_id for s in workbench.samples)
    assert workbench.sample_list.count() == len(wrong)


def test_other_results_offer_no_failure_mode(qtbot, make_window):
    from nemo_desktop.gui.panes.analyses.failure_mode_actions import FailureModeActions

    window = make_window()
    actions = FailureModeActions(window)
    qtbot.addWidget(actions)
    actions.set_result(type("R", (), {"analysis": "model-diff"})())
    assert actions.combo.count() == 0 and actions.isHidden() and actions.current() is None
    assert actions.show_in_browser() is None and actions.explain_errors() is None
