"""A failure-modes result on the Analyses page acts in the other panes: a mode's images fill the dataset browser's
grid (its sentence above them, "Show all images" to go back) and its misclassified images go to the workbench.
The result is a real one: the digits CNN's reference index of held-out digits in random inks, analysed with the
measured-pixels joint space of the failure-modes tests."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from gui_failure_modes import show_failure_modes_result

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


def test_a_mode_filters_the_browser_grid_with_its_sentence(qtbot, fm_window):
    from nemo_desktop.core.analyses.failure_modes.members import list_modes

    window, result, index = fm_window
    pane = show_failure_modes_result(qtbot, window, result)
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
    pane = show_failure_modes_result(qtbot, window, result)
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


def _ranked_paths(browser) -> list[str]:
    return [str(browser.data.paths[r]) for r in browser.grid_model.rows]


def test_a_sentence_ranks_every_image_in_the_browser(qtbot, fm_window, digits):
    """The mode's sentence (or a typed one) orders the browser's grid as the core ranks the index, with only the
    sentence embedded (the images' joint embeddings are the analysis' stored ones)."""
    from fm_digits_world import MeasuredFactorSpace
    from nemo_desktop.core.analyses.failure_modes.by_sentence import rank_index
    from nemo_desktop.core.analyses.failure_modes.members import list_modes

    window, result, index = fm_window
    space = MeasuredFactorSpace(*digits[2])
    window.session.put("embedder", "measured-factors", space)  # the result's joint space, as a script loads it
    pane = show_failure_modes_result(qtbot, window, result)
    actions = pane.failure_modes
    modes = list_modes(result)
    position = max(range(len(modes)), key=lambda i: len(modes[i].paths) * modes[i].holds)
    actions.select(position)
    mode = modes[position]
    assert mode.best and actions.sentence_edit.text() == mode.best
    with qtbot.waitSignal(actions.sig_ranked, timeout=60000) as ranked:
        actions.rank_button.click()
    ranking = ranked.args[0]
    assert (space.image_calls, space.text_calls) == (0, 1)  # stored image embeddings; one sentence embedded
    browser = window.show_pane("dataset_browser")
    store = window.session.store()
    core = rank_index(index, mode.best, embedder=space.fresh(), store=store)
    assert _ranked_paths(browser) == list(core.paths) == list(ranking.paths) and len(core.paths) == len(index)
    # The mode's images come first: far more of them in the top |mode| than their share of the dataset.
    k = len(mode.paths)
    top = set(_ranked_paths(browser)[:k])
    precision, share = len(top & set(mode.paths)) / k, k / len(index)
    assert precision > 3 * share and precision >= 0.5, (precision, share)
    assert browser.mode_bar.isVisibleTo(browser) and mode.best in browser.mode_bar.label.text()
    assert browser.mode_bar.label.text() == ranking.caption
    assert browser.count_label.text().endswith("(ranked by a sentence)")

    # A typed sentence ranks by itself; the other filters still apply inside the ranking.
    actions.sentence_edit.setText("a thick digit")
    with qtbot.waitSignal(actions.sig_ranked, timeout=60000):
        actions.rank_button.click()
    thick = rank_index(index, "a thick digit", embedder=space.fresh(), store=store)
    assert _ranked_paths(browser) == list(thick.paths) != list(core.paths)
    row_of = {str(p): r for r, p in enumerate(index.entries.paths)}
    wrong = [p for p in thick.paths if not index.entries.correct[row_of[p]]]
    assert browser.set_filter(correctness="misclassified") == len(wrong) > 0
    assert _ranked_paths(browser) == wrong
    browser.set_filter(correctness="all")

    # "Show all images" returns to the dataset's order.
    browser.mode_bar.clear_button.click()
    assert browser.ranking is None and not browser.mode_bar.isVisibleTo(browser)
    assert list(browser.grid_model.rows) == list(range(len(index)))


def _validated(qtbot, actions, sentence):
    actions.sentence_edit.setText(sentence)
    with qtbot.waitSignal(actions.sig_validated, timeout=120000) as done:
        actions.cei_button.click()
    return done.args[0]


def test_a_sentence_is_validated_with_cei(qtbot, fm_window):
    """The real shortcut (blue ink = eight) holds up under CEI on the mode's errors; a sentence about something
    else is said plainly not to. Figures and verdicts are the core's, and land in the result as the CLI's do."""
    from digits_world import DigitsCNNClassifier, DigitsEditor
    from fm_digits_world import EditWriterMLLM
    from nemo_desktop.core.analyses.failure_modes.members import list_modes
    from nemo_desktop.core.analyses.failure_modes.validate import SentenceValidator, cluster_errors, verdict

    window, result, index = fm_window
    mllm = EditWriterMLLM()
    window.session.put("mllm", "edit-writer", mllm)
    pane = show_failure_modes_result(qtbot, window, result)
    actions = pane.failure_modes
    modes = list_modes(result)
    # The largest mode a method describes as blue ink (where the CNN's shortcut shows).
    def cluster_of(m):
        return result.groups[m.group].hard_clusters[m.cluster]

    def blue_size(m):
        said = {p["text"] for ps in cluster_of(m).sentences.values() for p in ps}
        return ("a digit drawn in blue ink" in said) * m.holds * len(m.paths)

    position = max(range(len(modes)), key=lambda i: blue_size(modes[i]))
    assert blue_size(modes[position]) > 0
    actions.select(position)
    mode = modes[position]
    cluster = cluster_of(mode)
    blue = _validated(qtbot, actions, "a digit drawn in blue ink")
    assert mllm.calls and blue.n == min(8, len(cluster_errors(index, cluster))) > 0
    assert blue.held_up is True and blue.mean_cei > 5
    assert f"n = {blue.n} of {blue.tested}" in actions.cei_label.text() and blue.verdict in actions.cei_label.text()

    calls = len(mllm.calls)
    core = SentenceValidator(DigitsCNNClassifier(window.session.get("classifier").model), EditWriterMLLM(),
                             DigitsEditor(), window.session.store())
    again = core.validate(index, cluster, "a digit drawn in blue ink")  # the app's check, from the store
    assert (again.mean_cei, again.n) == (blue.mean_cei, blue.n) and len(mllm.calls) == calls
    assert verdict(again)[1] == blue.verdict

    qtbot.waitUntil(lambda: "CEI validation of the sentences" in pane.result_view.toPlainText(), timeout=60000)
    thick = _validated(qtbot, actions, "a thick digit")
    assert thick.held_up is False and "did not hold up" in actions.cei_label.text()
    assert [(v["sentence"], v["n"], v["held_up"]) for v in result.cei_validation["validations"]] == \
        [("a digit drawn in blue ink", blue.n, True), ("a thick digit", thick.n, False)]


def test_validation_without_an_editor_is_refused_before_any_work(qtbot, fm_window):
    from fm_digits_world import EditWriterMLLM

    window, result, _ = fm_window
    mllm = EditWriterMLLM()
    window.session.put("mllm", "edit-writer", mllm)
    window.session.unload("editor")  # none in memory; the default one is not downloaded
    pane = show_failure_modes_result(qtbot, window, result)
    actions = pane.failure_modes
    jobs = len(window.jobs.active_jobs())
    assert actions.validate_cei() is None
    text = actions.cei_label.text()
    assert text.startswith("Not validated:") and "editor" in text, text
    assert len(window.jobs.active_jobs()) == jobs and mllm.calls == []


def test_ranking_without_the_results_joint_space_says_so(qtbot, fm_window):
    window, result, _ = fm_window
    pane = show_failure_modes_result(qtbot, window, result)
    actions = pane.failure_modes
    handle = actions.rank_images()  # the measured-pixels space is in no catalog and not in the session
    with qtbot.waitSignal(handle.sig_failed, timeout=30000) as failed:
        pass
    assert "joint space test-double:measured-factors is not loaded" in failed.args[0]["message"]
    assert window.show_pane("dataset_browser").ranking is None


def test_the_page_shows_p_at_k_and_each_clusters_tau_fallback(qtbot, digits_window, digits, tmp_path):
    """An evaluated run whose tau lets no sentence through FPDiff: the shown result says, per cluster, that its
    FPDiff sentences are TopS padding, and gives P@K beside AHR/ACR/TPR/JI."""
    from digits_world import DigitsCNNClassifier
    from fm_digits_world import MeasuredFactorSpace, sentence_file, write_ink_manifest
    from nemo_desktop.core.analyses.failure_modes import (AttributeRelevance, FailureModesConfig,
                                                          FailureModesPipeline)
    from nemo_desktop.core.data.datasets import CsvManifestDataset
    from nemo_desktop.core.data.reference_index import build_index

    (tmp_path / "ink").mkdir()
    manifest = write_ink_manifest(tmp_path / "ink", digits)
    store, clf = digits_window.session.store(), DigitsCNNClassifier(digits[0])
    index = build_index(CsvManifestDataset(manifest), clf, store)
    cfg = FailureModesConfig(clusters=3, tau=0.99, split="correctness", relevance="attributes",
                             sentence_sets=(str(sentence_file(tmp_path / "s.json")),))
    result = FailureModesPipeline(clf, MeasuredFactorSpace(*digits[2]), store, cfg, AttributeRelevance(manifest))(index)
    assert result.groups[0].hard_clusters and all(c.tau_fallback["fpdiff"] for c in result.groups[0].hard_clusters)
    pane = show_failure_modes_result(qtbot, digits_window, result)
    text = pane.result_view.toPlainText()
    assert text.count("FPDiff fell back") >= len(result.groups[0].hard_clusters)
    assert "TopS padding" in text and "P@10 of the clusters" in text and "AHR" in text
