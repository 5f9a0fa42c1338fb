"""The GUI's Qt-free helpers (filters, secret references, checkpoint import, thumbnail keys) and the Qt
binding guard: fast tests without a window."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.app.dataset_browser.browse_data import BrowseData
from nemo_desktop.gui.panes.dataset_browser.filters import (CORRECT, MISCLASSIFIED, FilterSpec, class_accuracy,
                                                            filter_rows)


def _synthetic(n=5000, classes=7, seed=0) -> BrowseData:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    preds = np.where(rng.random(n) < 0.7, labels, rng.integers(0, classes, n))
    paths = np.array([f"/data/{i}.png" for i in range(n)], object)
    conf = rng.random(n).astype(np.float32)
    return BrowseData("/data", [f"c{i}" for i in range(classes)], paths, labels, preds, conf, conf.copy(),
                      index_id="idx")


def test_filters_match_numpy_masks():
    d = _synthetic()
    right = d.preds == d.labels
    assert np.array_equal(filter_rows(d, FilterSpec()), np.arange(len(d)))
    assert np.array_equal(filter_rows(d, FilterSpec(correctness=CORRECT)), np.flatnonzero(right))
    spec = FilterSpec(correctness=MISCLASSIFIED, true_class=3, pred_class=5, conf_min=0.2, conf_max=0.8)
    want = np.flatnonzero(~right & (d.labels == 3) & (d.preds == 5) & (d.conf >= 0.2) & (d.conf <= 0.8))
    assert np.array_equal(filter_rows(d, spec), want) and len(want) > 0


def test_class_accuracy_counts_images_and_correct_per_class():
    d = _synthetic(n=300)
    rows = class_accuracy(d)
    assert [r.images for r in rows] == np.bincount(d.labels, minlength=7).tolist()
    assert rows[2].correct == int(((d.labels == 2) & (d.preds == 2)).sum())
    assert rows[2].accuracy == pytest.approx(rows[2].correct / rows[2].images)


def test_references_are_accepted_and_keys_refused_without_echo():
    from nemo_desktop.gui.secret_refs import normalise_reference, settings_value

    assert normalise_reference("OPENAI_API_KEY") == "env:OPENAI_API_KEY"
    assert normalise_reference(" env:HF_TOKEN ") == "env:HF_TOKEN"
    assert normalise_reference("keyring:nemo-desktop/openai") == "keyring:nemo-desktop/openai"
    assert normalise_reference("") is None
    assert settings_value("env:HF_TOKEN") == "HF_TOKEN"
    for key in ("hf_" + "abcDEF123" * 3, "sk-" + "x1Y2z3" * 4, "not a reference"):
        with pytest.raises(ConfigError) as err:
            normalise_reference(key)
        assert key not in err.value.message and key not in (err.value.hint or "")


def test_a_key_is_refused_when_there_is_no_keyring(monkeypatch):
    from nemo_desktop.gui.secret_refs import store_in_keyring

    monkeypatch.setitem(sys.modules, "keyring", None)
    with pytest.raises(ConfigError) as err:
        store_in_keyring("sk-" + "q" * 30, "openai")
    assert "keyring" in err.value.message and "env:OPENAI_API_KEY" in err.value.hint


def test_checkpoint_import_checks_name_files_and_format(tmp_path):
    from functools import partial

    from nemo_desktop.gui.panes.model_manager.custom_import import CheckpointImport, Preprocessing, entry_dict

    CheckpointImport = partial(CheckpointImport, preprocessing=Preprocessing((224, 224), (0.5,) * 3, (0.5,) * 3))
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"\0" * 1000)
    classes = tmp_path / "classes.txt"
    classes.write_text("cat\ndog\n")
    entry = entry_dict(CheckpointImport("mine", "resnet50", weights, classes))
    assert entry["source"] == f"checkpoint:resnet50:{weights}" and entry["options"]["class_file"] == str(classes)
    assert entry["repo"] == str(weights) and "vram_bf16_gb" in entry["estimated"]
    with pytest.raises(ConfigError, match="cannot be a model name"):
        entry_dict(CheckpointImport("my model!", "resnet50", weights, classes))
    with pytest.raises(ConfigError, match="not found"):
        entry_dict(CheckpointImport("mine", "resnet50", tmp_path / "missing.pth", classes))
    pickle = tmp_path / "w.pkl"
    pickle.write_bytes(b"x")
    with pytest.raises(ConfigError, match="not a weights file"):
        entry_dict(CheckpointImport("mine", "resnet50", pickle, classes))


def test_thumbnail_key_follows_content_or_modification(tmp_path):
    from nemo_desktop.gui.thumbnails import cache_name

    f = tmp_path / "a.png"
    f.write_bytes(b"one")
    first = cache_name(str(f), None)
    os.utime(f, ns=(1, 2_000_000_000))
    assert cache_name(str(f), None) != first  # touched: a new thumbnail
    assert cache_name(str(f), "ab" * 32) == cache_name(str(tmp_path / "copy.png"), "ab" * 32)  # same content
    assert cache_name(str(tmp_path / "gone.png"), None) is None


def test_the_installed_qt_binding_keeps_reference_counts(qapp):
    """PySide6 6.12.0 on Python 3.11 loses a reference to True on every emit and aborts the app after a
    few thousand progress updates; the application refuses to start on such a binding."""
    from PySide6.QtCore import QObject, Signal

    from nemo_desktop.gui.binding_check import binding_corrupts_refcounts

    class Emitter(QObject):
        sig = Signal(object)

    e, got = Emitter(), []
    e.sig.connect(got.append)
    before = sys.getrefcount(True), sys.getrefcount(None)
    for _ in range(500):
        e.sig.emit(None)
    got.clear()
    assert (sys.getrefcount(True), sys.getrefcount(None)) == before
    assert not binding_corrupts_refcounts()


def test_the_desktop_entry_starts_the_gui_entry_point():
    import configparser
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(root / "packaging" / "desktop" / "nemo-desktop.desktop")
    desktop = entry["Desktop Entry"]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["gui-scripts"]
    assert desktop["Type"] == "Application" and desktop["Exec"].split()[0] in scripts
    assert desktop["Name"] == "NEMO Desktop" and desktop["Terminal"] == "false"


def test_class_table_sorts_itself_and_keeps_the_order_across_updates(qapp):
    from PySide6.QtCore import Qt

    from nemo_desktop.gui.panes.dataset_browser.filters import ClassAccuracy
    from nemo_desktop.gui.panes.dataset_browser.widgets.class_table import CLASS_ROLE, ClassAccuracyModel

    rows = [ClassAccuracy(0, "cat", 10, 9), ClassAccuracy(1, "Ant", 4, 1), ClassAccuracy(2, "dog", 0, 0),
            ClassAccuracy(3, "bee", 8, 6)]
    model = ClassAccuracyModel()
    model.set_rows(rows, indexed=True)
    names = lambda: [model.index(r, 0).data() for r in range(model.rowCount())]  # noqa: E731
    assert names() == ["cat", "Ant", "dog", "bee"]  # the classifier's order until a column is clicked
    model.sort(3, Qt.SortOrder.DescendingOrder)  # accuracy, best first; a class without images last
    assert names() == ["cat", "bee", "Ant", "dog"]
    assert [model.index(r, 3).data() for r in range(4)] == ["90.0%", "75.0%", "25.0%", "—"]
    model.sort(0, Qt.SortOrder.AscendingOrder)  # names, ignoring case
    assert names() == ["Ant", "bee", "cat", "dog"]
    assert model.index(0, 2).data(CLASS_ROLE) == 1  # every cell knows its class (a click filters by it)
    model.set_rows(list(reversed(rows)), indexed=True)  # new counts keep the user's sort
    assert names() == ["Ant", "bee", "cat", "dog"]
    model.sort(-1)
    assert names() == ["cat", "Ant", "dog", "bee"]
