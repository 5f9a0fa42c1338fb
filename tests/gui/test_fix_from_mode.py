"""Issue 29 in the app: "Try a fix…" from a failure mode. The failure-modes result's picker (Analyses page) and the
dataset browser's mode bar open the fix page filled with the mode (its stored result and position, its confusions'
classes, its sentence); a run from it trains on the mode's images with their true labels and shows the before/after
charts. The result is a real one: the digits CNN (a colour shortcut) over a reference index of held-out digits in
random inks, analysed with the measured-pixels joint space of the failure-modes tests."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from gui_failure_modes import show_failure_modes_result

pytestmark = pytest.mark.gui
_FM_TESTS = str(Path(__file__).resolve().parents[1] / "core" / "analyses" / "failure_modes")
if _FM_TESTS not in sys.path:
    sys.path.insert(0, _FM_TESTS)

INDEXED = 250  # held-out digits the failure modes are found on; the rest are the fix's held-out sets


@pytest.fixture
def fm_fix_window(digits_window, digits, tmp_path):
    from digits_world import CLASS_NAMES, DigitsCNNClassifier, render, training_ink
    from fm_digits_world import INKS, MeasuredFactorSpace, sentence_file, write_ink_manifest
    from nemo_desktop.core.analyses.failure_modes import FailureModesConfig, FailureModesPipeline
    from nemo_desktop.core.data.datasets import CsvManifestDataset
    from nemo_desktop.core.data.reference_index import build_index

    model, (x_test, y_test), (x_train, y_train) = digits
    (tmp_path / "ink").mkdir()
    manifest = write_ink_manifest(tmp_path / "ink", (model, (x_test[:INDEXED], y_test[:INDEXED]), None))
    store, clf = digits_window.session.store(), DigitsCNNClassifier(model)
    index = build_index(CsvManifestDataset(manifest), clf, store)
    cfg = FailureModesConfig(clusters=3, tau=None, split="correctness",
                             sentence_sets=(str(sentence_file(tmp_path / "s.json")),))
    result = FailureModesPipeline(clf, MeasuredFactorSpace(*digits[2]), store, cfg)(index)

    # The fix's folder: training digits in their training inks; held out, the other test digits in random inks,
    # affected where the shortcut pulls (red or blue digits that are neither three nor eight).
    rng, folder = np.random.default_rng(1), tmp_path / "fixdata"
    for split, pairs in (("train", [(x, int(y), training_ink(int(y), rng)) for x, y in zip(x_train[:200], y_train)]),
                         ("held", [(x, int(y), INKS[int(rng.integers(len(INKS)))])
                                   for x, y in zip(x_test[INDEXED:], y_test[INDEXED:])])):
        for i, (x, y, ink) in enumerate(pairs):
            if split == "held":
                shortcut = ink in ("red", "blue") and CLASS_NAMES[y] not in ("three", "eight")
                sub = "affected" if shortcut else "rest"
            else:
                sub = split
            d = folder / sub / CLASS_NAMES[y]
            d.mkdir(parents=True, exist_ok=True)
            render(x, ink).save(d / f"{i:04d}.png")
    return digits_window, result, index, folder


def _fix_page_filled(pane, settings) -> bool:
    if pane.page is None or pane.page.spec.name != "fix":
        return False
    values = pane.form.values()
    return all(values.get(k) == v for k, v in settings.items())


def test_try_a_fix_from_a_failure_mode_fills_the_page_and_runs(qtbot, fm_fix_window):
    from nemo_desktop.core.analyses.failure_modes.members import list_modes, mode_members
    from nemo_desktop.core.analyses.fix.from_mode import fix_settings_for_mode

    window, result, index, folder = fm_fix_window
    pane = show_failure_modes_result(qtbot, window, result)
    actions = pane.failure_modes
    modes = list_modes(result)
    wrong = [sum(not m.correct for m in mode_members(mode, index)[0]) for mode in modes]
    position = int(np.argmax(wrong))
    mode = modes[position]
    actions.select(position)
    assert actions.fix_button.isVisibleTo(pane) and actions.fix_button.isEnabled()
    with qtbot.waitSignal(actions.sig_sent, timeout=30000) as sent:
        actions.fix_button.click()
    assert sent.args == ["fix", mode]
    expected = fix_settings_for_mode(window.session.store(), result.result_key, position + 1)["settings"]
    assert expected["failure_mode"] == position + 1 and expected["affected_classes"]
    qtbot.waitUntil(lambda: _fix_page_filled(pane, expected), timeout=60000)
    assert window.current_pane() is pane
    assert mode.sentence in pane.description.text() and mode.title in pane.description.text()

    pane.data_path.setText(str(folder))
    for name, value in {"epochs": 1, "bootstrap": 100, "save": False}.items():
        pane.form.set_value(name, value)
    with qtbot.waitSignal(pane.sig_result_shown, timeout=240000):
        pane.run()
    fix = pane.result
    assert fix.analysis == "fix" and fix.config["failure_modes"] == result.result_key
    fm = fix.data["description"]["failure_mode"]
    assert fm["images"] + fm["held_out_excluded"] + fm["missing"] == len(mode.paths) and fm["images"] > 0
    assert fix.data["targeted"] == fm["images"]  # no edit given: the mode's own images are the targeted data
    assert sum(s["count"] for s in fix.sources if s["source"] == "finding-images") == fm["images"]
    html = pane.state().html
    assert html.count("<svg") == 2 and f"n = {fix.affected['overall']['n']}" in html
    assert pane.result.guard["why"].split(";")[0] in pane.result_view.toPlainText()


def test_the_browsers_mode_bar_offers_the_fix_for_the_mode_it_shows(qtbot, fm_fix_window):
    from nemo_desktop.core.analyses.failure_modes.by_sentence import SentenceRanking
    from nemo_desktop.core.analyses.failure_modes.members import list_modes
    from nemo_desktop.core.analyses.fix.from_mode import fix_settings_for_mode

    window, result, index, _ = fm_fix_window
    pane = show_failure_modes_result(qtbot, window, result)
    actions = pane.failure_modes
    last = len(list_modes(result)) - 1
    actions.select(last)
    with qtbot.waitSignal(actions.sig_sent, timeout=30000):
        actions.show_in_browser()
    browser = window.show_pane("dataset_browser")
    bar = browser.mode_bar
    assert bar.isVisibleTo(browser) and bar.fix_button.isVisibleTo(browser)
    expected = fix_settings_for_mode(window.session.store(), result.result_key, last + 1)["settings"]
    bar.fix_button.click()
    qtbot.waitUntil(lambda: window.current_pane() is pane and _fix_page_filled(pane, expected), timeout=60000)
    assert list_modes(result)[last].sentence in pane.description.text()

    # A sentence ranking orders the grid but is no finding: no fix offered.
    bar.set_mode(SentenceRanking("a red digit", index.index_id, None, "test", (), np.zeros(0)))
    assert not bar.fix_button.isVisibleTo(browser)
