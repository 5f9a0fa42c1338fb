"""The Analyses pane: every registered dataset / model / fit analysis gets the same page from its registry entry
(data to run on, models, settings form, run with progress and cancel, its report section, export)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from PIL import Image


@dataclass(frozen=True)
class FolderCountConfig:
    min_images: int = field(default=1, metadata={"label": "Minimum images", "help": "classes below are left out",
                                                 "min": 0, "max": 1000})


@dataclass
class FolderCountResult:
    counts: dict
    kind = "dataset"
    analysis = "folder-count"
    key = None
    manifest: dict = field(default_factory=dict)

    def to_dict(self):
        return {"counts": self.counts}

    @classmethod
    def from_dict(cls, d):
        return cls(d["counts"])


class FolderCount:
    """Test double: counts the images of each class folder, one class per unit (so cancel has units)."""

    gate: threading.Event | None = None

    def __init__(self, store=None, config=None):
        self.config = config

    def __call__(self, folder, ctx):
        counts = {}
        classes = sorted(p for p in Path(folder).iterdir() if p.is_dir())
        for i, d in enumerate(classes):
            ctx.check_cancelled()
            ctx.progress("Counting", i, len(classes), d.name)
            if self.gate is not None:
                self.gate.wait(5)
            n = len(list(d.glob("*.png")))
            if n >= self.config.min_images:
                counts[d.name] = n
        return FolderCountResult(counts)


@pytest.fixture
def folder_count(monkeypatch):
    from nemo_desktop.core.registry import AnalysisSpec, Inputs, list_analyses
    from nemo_desktop.core.registry import registry
    from nemo_desktop.core.reports import sections
    from nemo_desktop.core.reports.document import Paragraph, ReportDocument, Section

    list_analyses()
    monkeypatch.setitem(registry._SPECS, "folder-count", AnalysisSpec(
        "folder-count", "dataset", "1", FolderCount, FolderCountConfig, FolderCountResult,
        inputs=Inputs(classifier="none", data="dataset"), description="Images per class folder (test double)."))

    def report(result, store, ctx=None, **_):
        rows = [Paragraph(f"{name}: {n} images") for name, n in result.counts.items()]
        return ReportDocument(kind="single", title="Folder count <b>", subtitle="", generated_at="",
                              sections=[Section("Counts", "counts", rows)], meta=[])

    sections._ensure()
    monkeypatch.setitem(sections._REPORTS, ("dataset", "folder-count"), report)
    FolderCount.gate = None
    return "folder-count"


@pytest.fixture
def class_folders(tmp_path):
    root = tmp_path / "data"
    for name, n in (("cat", 3), ("dog", 1), ("owl", 2)):
        (root / name).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (8, 8), (i * 40, 0, 0)).save(root / name / f"{i}.png")
    return root


def _pane(qtbot, make_window, name):
    # In-process: the test analyses are registered in this process only, and the model-differences tests put
    # their models into the window's own session (tests/gui/test_gui_worker_pages.py runs pages in the worker).
    window = make_window(model_process="in-process")
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("analyses")
    pane.ensure_shown_once()  # the first showing lists the analyses (a no-op when the tab change already did)
    qtbot.waitUntil(lambda: pane.analysis_list.count() > 0, timeout=180000)
    pane.select_analysis(name)
    qtbot.waitUntil(lambda: pane.page is not None and pane.page.spec.name == name, timeout=180000)
    return window, pane


def test_every_registered_dataset_model_and_fit_analysis_is_listed(qtbot, make_window):
    """And the per-sample analyses that are not explanation methods (those have the workbench)."""
    from nemo_desktop.core.registry.methods import list_methods
    from nemo_desktop.core.registry import get_analysis, list_analyses

    window, pane = _pane(qtbot, make_window, "global-explanation")
    from nemo_desktop.gui.panes.analyses.plugin import NAME_ROLE

    listed = {pane.analysis_list.item(i).data(NAME_ROLE) for i in range(pane.analysis_list.count())}
    assert listed == {n for n in list_analyses() if get_analysis(n).kind in ("dataset", "model", "fit")} | \
        (set(list_analyses("sample")) - set(list_methods()))
    assert "competency-cf" in listed
    # The global explanation runs on a stored run and needs a multimodal LLM: the page asks for exactly that.
    assert pane.data_label.text() == "Run:" and pane.data_combo.isVisibleTo(pane)
    assert not pane.data_path.isVisibleTo(pane)
    assert "mllm" in pane._model_boxes and "score" in pane.form.editors


def test_run_shows_the_report_section_and_exports_it(qtbot, make_window, folder_count, class_folders, tmp_path):
    window, pane = _pane(qtbot, make_window, folder_count)
    assert pane.data_path.isVisibleTo(pane) and not pane.models_box.isVisibleTo(pane)
    pane.form.set_value("min_images", 2)  # the settings form comes from the config's field metadata
    pane.data_path.setText(str(class_folders))
    with qtbot.waitSignal(pane.sig_result_shown, timeout=20000):
        pane.run()
    text = pane.result_view.toPlainText()
    assert "cat: 3 images" in text and "owl: 2 images" in text and "dog" not in text
    assert "Folder count <b>" in text  # model text is escaped, not interpreted
    (tmp_path / "out").mkdir()
    handle = pane.export(str(tmp_path / "out" / "counts.html"))
    qtbot.waitUntil(lambda: handle.state in ("done", "failed"), timeout=20000)
    assert handle.state == "done"
    html = (tmp_path / "out" / "counts.html").read_text()
    assert "cat: 3 images" in html and "Folder count &lt;b&gt;" in html


def test_a_missing_folder_is_a_clear_error_and_cancel_ends_the_run(qtbot, make_window, folder_count, class_folders):
    window, pane = _pane(qtbot, make_window, folder_count)
    pane.data_path.setText(str(class_folders / "nope"))
    handle = pane.run()
    with qtbot.waitSignal(handle.sig_failed, timeout=20000) as failed:
        pass
    assert "is not a folder" in failed.args[0]["message"] and failed.args[0]["hint"]

    FolderCount.gate = threading.Event()
    pane.data_path.setText(str(class_folders))
    handle = pane.run()
    qtbot.waitUntil(lambda: "Counting" in pane.stage_label.text(), timeout=20000)
    assert pane.cancel_button.isEnabled() and not pane.run_button.isEnabled()
    pane.cancel()
    FolderCount.gate.set()
    qtbot.waitUntil(lambda: handle.state == "cancelled", timeout=20000)
    assert pane.stage_label.text().startswith("Cancelled") and pane.run_button.isEnabled()
    assert pane.result is None


def test_model_differences_run_from_the_page_with_the_session_models(qtbot, make_window):
    """The real model-diff analysis from its page: two classifiers, an LLM and the digits condition source."""
    from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays
    from fixtures_tiny.model_diff_llms import DiffLLM
    from nemo_desktop.core.models.protocols import ModelInfo

    X, y = load_digits_arrays()
    a = DigitsMLPClassifier.train(X, y, hidden=16, seed=0)
    b = DigitsMLPClassifier.train(X[::2], y[::2], hidden=8, seed=1)
    b.info = ModelInfo("test-double:digits-mlp-b", "test-double", b.info.revision)
    window, pane = _pane(qtbot, make_window, "model-diff")
    session = window.session
    session.put("classifier", "digits-a", a)
    session.put("classifier_b", "digits-b", b)
    session.put("mllm", "diff-llm", DiffLLM())
    assert not pane.data_combo.isVisibleTo(pane) and not pane.data_path.isVisibleTo(pane)  # conditions: generator
    generator = pane._model_boxes["generator"]
    generator.setCurrentIndex(generator.findData("digits"))
    for name, value in {"samples_per_condition": 2, "initial_conditions": 2, "iterations": 1, "explore_size": 2,
                        "beam_size": 1, "test_conditions": 6, "evaluator_batch": 8}.items():
        pane.form.set_value(name, value)
    with qtbot.waitSignal(pane.sig_result_shown, timeout=120000):
        pane.run()
    assert pane.result.analysis == "model-diff" and pane.result.kind == "model"
    assert "Model A" in pane.result_view.toPlainText() or "model A" in pane.result_view.toPlainText()
