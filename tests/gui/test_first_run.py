"""First run: the guides in the empty panes tick step by step, the offline demo works end to end through the real
loader, recent datasets persist across windows, and the last models come back at start only from disk."""
from __future__ import annotations

import shutil

import pytest

from nemo_desktop.core.demo import digits as demo
from nemo_desktop.core.store.paths import get_paths
from nemo_desktop.gui.first_run import memory
from nemo_desktop.gui.first_run.guide import DONE
from nemo_desktop.core.app.samples import Sample

from demo_cache import install_built_demo
from model_process import set_model_process


def _shown(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    return window.first_run


def _close(qtbot, window):
    """Close once idle: the window's warm-up imports (1.5 s after the first paint) are slow on a busy CPU."""
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=180000)
    window.close()


def _open(qtbot, window, path):
    browser = window.panes["dataset_browser"]
    with qtbot.waitSignal(browser.sig_opened, timeout=60000):
        browser.open_path(path)
    return browser


def _index(qtbot, browser):
    handle = browser.index_dataset()
    qtbot.waitUntil(lambda: handle.state == "done", timeout=300000)
    qtbot.waitUntil(lambda: browser.data is not None and browser.data.indexed, timeout=10000)


def test_guides_show_in_empty_panes_and_steps_tick(qtbot, make_window, digits, digits_reference, blue_three):
    from digits_world import DigitsCNNClassifier, DigitsEditor, ScriptedDigitsMLLM

    window = make_window(model_process="in-process")  # the models are put into the window's own session
    fr = _shown(qtbot, window)
    browser, workbench = window.panes["dataset_browser"], window.panes["workbench"]
    assert fr.dataset_guide.isVisibleTo(browser) and fr.workbench_guide.isVisibleTo(workbench)
    assert fr.workbench_guide.done_steps() == []
    assert "Open a folder or drop images here" in fr.dataset_guide.findChild(type(fr.dataset_guide.demo_note)).text()
    assert "does not fake" in fr.workbench_guide.demo_note.text()

    window.session.put("classifier", "digits-cnn", DigitsCNNClassifier(digits[0]))  # 1. a classifier
    window.sig_models_changed.emit()
    assert fr.workbench_guide.done_steps() == ["classifier"]

    _open(qtbot, window, digits_reference)  # 2. a dataset, indexed
    assert not fr.dataset_guide.isVisibleTo(browser)  # the grid takes the guide's place
    assert fr.workbench_guide.done_steps() == ["classifier"]  # opened, not indexed yet
    _index(qtbot, browser)
    assert fr.workbench_guide.done_steps() == ["classifier", "dataset"]

    workbench.set_samples([Sample(str(blue_three), "three")])  # true class only: not known to be a mistake
    assert "sample" not in fr.workbench_guide.done_steps()
    workbench.set_samples([Sample(str(blue_three), "three", "eight", 0.9)])  # 3. a misclassified image
    assert fr.workbench_guide.done_steps() == ["classifier", "dataset", "sample"]
    assert fr.workbench_guide.marks["sample"].text() == DONE

    window.session.put("mllm", "scripted-digits-mllm", ScriptedDigitsMLLM())  # 4. diagnose
    window.session.put("editor", "digits-editor", DigitsEditor())
    window.show_pane("workbench")
    qtbot.waitUntil(lambda: bool(workbench.methods), timeout=20000)
    workbench.form.set_value("k", 3)
    with qtbot.waitSignal(workbench.sig_results_shown, timeout=120000):
        workbench.run()
    assert fr.steps()["diagnose"]
    assert not fr.workbench_guide.isVisibleTo(workbench)  # the result takes the guide's place
    _close(qtbot, window)


def test_try_the_demo_end_to_end(qtbot, make_window):
    """Dataset written, classifier trained on first use, loaded through the timm loader, shown and indexed.
    In-process: it checks the loaded classifier object itself (tests/gui/test_gui_worker_pages.py runs the demo in
    the model worker)."""
    window = make_window(model_process="in-process")
    fr = _shown(qtbot, window)
    browser = window.panes["dataset_browser"]
    with qtbot.waitSignal(fr.sig_demo_ready, timeout=600000) as ready:
        fr.dataset_guide.demo_button.click()
    setup = ready.args[0]
    assert not setup.reused_classifier and setup.train_images == 1437
    assert len(list(setup.dataset_dir.glob("*/*.png"))) == 360
    classifier = window.session.get("classifier")
    assert type(classifier).__name__ == "TimmClassifier" and classifier.info.model_id == demo.CLASSIFIER_ID
    assert window.session.loaded()["classifier"] == demo.CLASSIFIER_ID
    assert browser.dataset_path == str(setup.dataset_dir) and len(browser.data) == 360
    qtbot.waitUntil(lambda: browser.data.indexed, timeout=300000)  # indexing starts by itself
    accuracy = float(browser.data.correct.mean())
    print(f"demo classifier indexed in the app: {100 * accuracy:.1f}% of {len(browser.data)} held-out digits "
          f"(trained in {setup.train_seconds:.1f} s)")
    assert accuracy > 0.8  # chance is 10 %
    assert accuracy == pytest.approx(setup.holdout_accuracy, abs=0.01)
    assert (~browser.data.correct).sum() > 0  # real mistakes to pick in step 3
    assert fr.steps()["classifier"] and fr.steps()["dataset"]
    assert memory.recent_datasets(window.background_settings)[0] == str(setup.dataset_dir)
    assert "Demo ready" in fr.dataset_guide.demo_status.text()

    with qtbot.waitSignal(fr.sig_demo_ready, timeout=120000) as again:  # a second time reuses everything
        fr.try_demo()
    assert again.args[0].reused_classifier and again.args[0].reused_dataset
    _close(qtbot, window)


def _tiny_dataset(root):
    from PIL import Image

    for name, colour in (("red", (200, 0, 0)), ("blue", (0, 0, 200))):
        (root / name).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (16, 16), colour).save(root / name / f"{i}.png")
    return root


def test_recent_datasets_persist_across_windows(qtbot, make_window, tmp_path):
    first, second = _tiny_dataset(tmp_path / "first"), _tiny_dataset(tmp_path / "second")
    window = make_window()
    _open(qtbot, window, first)
    _open(qtbot, window, second)
    _close(qtbot, window)

    again = make_window()
    fr = again.first_run
    assert memory.recent_datasets(again.background_settings)[:2] == [str(second), str(first)]
    items = [fr.dataset_guide.recent_list.item(i).data(memory_path_role()) for i in
             range(fr.dataset_guide.recent_list.count())]
    assert items[:2] == [str(second), str(first)]
    assert [a.text() for a in fr.recent_menu.actions()][:2] == [str(second), str(first)]
    browser = again.panes["dataset_browser"]
    with qtbot.waitSignal(browser.sig_opened, timeout=60000):
        fr.dataset_guide.recent_list.itemClicked.emit(fr.dataset_guide.recent_list.item(1))
    assert browser.dataset_path == str(first)

    shutil.rmtree(second)  # a recent dataset that is gone is dropped from the list, with a word why
    assert fr.open_recent(str(second)) is None
    assert str(second) not in memory.recent_datasets(again.background_settings)
    assert "no longer there" in again.statusBar().currentMessage()


def memory_path_role():
    from nemo_desktop.gui.first_run.guide import PATH_ROLE

    return PATH_ROLE


def test_last_models_are_restored_at_start_only_from_disk(qtbot, make_window, monkeypatch):
    from nemo_desktop.core.models.catalog import list_catalog

    paths = get_paths()
    install_built_demo(paths)
    demo.prepare_demo(paths)  # reused, registered
    set_model_process("in-process")  # both windows: the patched download below is seen in this process only
    window = make_window()
    _shown(qtbot, window)
    handle = window.panes["model_manager"].load("classifier", demo.CLASSIFIER_ID)
    qtbot.waitUntil(lambda: handle.state == "done", timeout=60000)
    # The load's own "models changed" (emitted when its job finishes) records again: let it pass before the
    # line below stands in for another day's memory, or it would overwrite it.
    qtbot.waitUntil(lambda: not window.jobs.busy, timeout=10000)
    qtbot.wait(200)
    assert memory.remembered_models(window.background_settings) == {"classifier": demo.CLASSIFIER_ID}
    # An MLLM the user had loaded on another day, whose weights are not in this (empty) cache.
    mllm = next(e.id for e in list_catalog("mllm") if not e.repo.startswith(("/", ".", "~")))
    memory.remember_models(window.background_settings, {"classifier": demo.CLASSIFIER_ID, "mllm": mllm})
    _close(qtbot, window)

    fetched = []  # the start must not even try to download
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda *a, **k: fetched.append(a) or 1 / 0)
    again = make_window()
    with qtbot.waitSignal(again.first_run.sig_restored, timeout=60000) as restored:
        _shown(qtbot, again)
    outcome = restored.args[0]
    assert outcome["restored"] == [("classifier", demo.CLASSIFIER_ID)]
    assert [(k, r) for k, r, _why in outcome["skipped"]] == [("mllm", mllm)]
    assert "not downloaded" in outcome["skipped"][0][2]
    assert again.session.loaded() == {"classifier": demo.CLASSIFIER_ID}
    assert fetched == []
    note = again.first_run.workbench_guide.note
    assert note.isVisibleTo(again.first_run.workbench_guide) and mllm in note.text()
    qtbot.waitUntil(lambda: not again.jobs.busy, timeout=10000)
    assert again.first_run.workbench_guide.done_steps() == ["classifier"]
    # What was remembered survives a start that could not restore all of it.
    qtbot.waitUntil(lambda: memory.remembered_models(again.background_settings).get("classifier") == demo.CLASSIFIER_ID,
                    timeout=5000)
    _close(qtbot, again)

    shutil.rmtree(demo.classifier_dir(paths))  # the weights are gone: a quiet note, nothing loaded
    third = make_window()
    with qtbot.waitSignal(third.first_run.sig_restored, timeout=60000) as restored:
        _shown(qtbot, third)
    assert restored.args[0]["restored"] == []
    assert ("classifier", demo.CLASSIFIER_ID, "its weights are no longer on disk") in restored.args[0]["skipped"]
    assert third.session.loaded() == {}
    assert "was not loaded" in third.first_run.workbench_guide.note.text()
    _close(qtbot, third)
