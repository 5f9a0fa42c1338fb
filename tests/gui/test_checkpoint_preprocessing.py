"""Custom classifier import takes its preprocessing from the checkpoint's config.json when it has one, else
from the dialog's fields; the dialog stays open on a validation error; indexing with a classifier that
predicts one class for most images shows a warning (issue 19, "never mislead")."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.gui.panes.model_manager.custom_import import (FROM_CONFIG, CheckpointImport, Preprocessing,
                                                                add_checkpoint, checkpoint_config, entry_dict)

# What the weights were "trained" with: not the architecture's defaults (test_resnet: 160 px, ImageNet stats).
TRAINED = {"input_size": (3, 32, 32), "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25),
           "interpolation": "bilinear", "crop_pct": 1.0}


@pytest.fixture(scope="module")
def saved_timm(tmp_path_factory):
    """A random timm model saved with its own save_for_hf and a preprocessing unlike its defaults."""
    import timm
    import torch

    from fixtures_tiny.classifiers import TINY_CLASSES, write_class_file

    root = tmp_path_factory.mktemp("finetuned")
    torch.manual_seed(0)
    model = timm.create_model("test_resnet", pretrained=False, num_classes=10)
    timm.models.save_for_hf(model, str(root / "model"), safe_serialization=True, data_config=dict(TRAINED))
    bare = root / "bare"
    bare.mkdir()
    shutil.copy(root / "model" / "model.safetensors", bare / "weights.safetensors")
    return {"folder": root / "model", "weights": root / "model" / "model.safetensors",
            "bare": bare / "weights.safetensors", "classes": write_class_file(root / "classes.txt", TINY_CLASSES)}


def images(n=6):
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (48 + 8 * i, 40, 3), dtype=np.uint8)) for i in range(n)]


def test_config_json_beside_the_weights_sets_the_preprocessing(saved_timm, gui_home):
    from nemo_desktop.core.models.catalog import clear_cache
    from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

    pre, arch = checkpoint_config(saved_timm["weights"])
    assert arch == "test_resnet" and pre.source == FROM_CONFIG
    assert pre.input_size == (32, 32) and pre.std == (0.25, 0.25, 0.25) and pre.interpolation == "bilinear"
    # The dialog's values lose to the checkpoint's own config.
    wrong = Preprocessing((224, 224), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    clear_cache()
    entry = add_checkpoint(CheckpointImport("mine", "test_resnet", saved_timm["weights"], saved_timm["classes"],
                                            preprocessing=wrong))
    opts = json.loads((gui_home / "config" / "catalog.json").read_text())["entries"][0]["options"]
    assert opts["data_config"]["input_size"] == [3, 32, 32] and "config.json" in entry.notes
    imported = load_model("mine", LoadOptions(device="cpu"))
    reference = load_model(ModelSpec(kind="classifier", family="timm", source=f"local-dir:{saved_timm['folder']}",
                                     options={"class_file": str(saved_timm["classes"])}), LoadOptions(device="cpu"))
    assert imported.data_config["input_size"] == (3, 32, 32) and imported.data_config["std"] == (0.25,) * 3
    # The same weights through the import and through their folder now give the same predictions.
    np.testing.assert_allclose(imported.predict_proba(images()), reference.predict_proba(images()), atol=1e-5)
    clear_cache()


def test_without_a_config_the_import_uses_the_fields_and_needs_them(saved_timm):
    req = CheckpointImport("bare", "test_resnet", saved_timm["bare"], saved_timm["classes"])
    with pytest.raises(ConfigError, match="preprocessing is unknown"):
        entry_dict(req)
    pre = Preprocessing((32, 32), (0.5, 0.5, 0.5), (0.25, 0.25, 0.25), "bilinear")
    entry = entry_dict(CheckpointImport("bare", "test_resnet", saved_timm["bare"], saved_timm["classes"],
                                        preprocessing=pre))
    assert entry["options"]["data_config"] == {"input_size": [3, 32, 32], "mean": [0.5] * 3, "std": [0.25] * 3,
                                               "interpolation": "bilinear", "crop_pct": 1.0}
    assert "set at import" in entry["notes"]
    with pytest.raises(ConfigError, match="out of range"):
        entry_dict(CheckpointImport("bare", "test_resnet", saved_timm["bare"], saved_timm["classes"],
                                    preprocessing=Preprocessing((2, 2), (0.5,) * 3, (0.25,) * 3)))


def test_dialog_fills_from_the_config_and_stays_open_on_an_error(qtbot, saved_timm):
    from nemo_desktop.gui.panes.model_manager.widgets.import_dialog import ImportCheckpointDialog

    dialog = ImportCheckpointDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.weights_edit.setText(str(saved_timm["weights"]))
    assert dialog.size_spin.value() == 32 and not dialog.size_spin.isEnabled()
    assert dialog.interp_combo.currentText() == "bilinear" and dialog.arch_edit.text() == "test_resnet"
    assert "config.json" in dialog.preprocessing_note.text()
    # No class file: the dialog says why and stays open.
    dialog.accept()
    assert dialog.isVisible() and dialog.result() != dialog.DialogCode.Accepted
    assert "class" in dialog.error_label.text().lower() and dialog.error_label.isVisible()

    dialog.weights_edit.setText(str(saved_timm["bare"]))  # no config: the fields are the user's to set
    assert dialog.size_spin.isEnabled() and "No config.json" in dialog.preprocessing_note.text()
    dialog.size_spin.setValue(48)
    dialog.norm_combo.setCurrentText("Inception (0.5, 0.5)")
    dialog.interp_combo.setCurrentText("nearest")
    dialog.classes_edit.setText(str(saved_timm["classes"]))
    req = dialog.request()
    assert req.preprocessing == Preprocessing((48, 48), (0.5,) * 3, (0.5,) * 3, "nearest")
    with qtbot.waitSignal(dialog.accepted, timeout=2000):
        dialog.accept()


def test_indexing_with_a_collapsed_classifier_shows_a_warning(qtbot, make_window, digits, digits_reference):
    from digits_world import DigitsCNNClassifier

    class NegatedInputDigits(DigitsCNNClassifier):
        """The real digits CNN fed inverted pixels, as with a wrong normalisation: it predicts 'zero' for most."""

        def predict_proba(self, images, *, class_prompts=None):
            import torch
            from digits_world import _to_tensor

            with torch.no_grad():
                return torch.softmax(self.model(-_to_tensor(images)), dim=1).numpy().astype(np.float32)

    window = make_window(model_process="in-process")
    window.session.put("classifier", "digits-cnn", NegatedInputDigits(digits[0]))
    window.sig_models_changed.emit()
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("dataset_browser")
    with qtbot.waitSignal(pane.sig_opened, timeout=20000):
        pane.open_path(digits_reference)
    assert pane.warning_label.isHidden()
    with qtbot.waitSignal(pane.sig_opened, timeout=60000) as opened:
        pane.index_dataset()
    data = opened.args[0]
    assert np.bincount(data.preds).max() >= 0.5 * len(data)
    assert pane.warning_label.isVisible()
    assert "are predicted as 'zero'" in pane.warning_label.text()
    assert "preprocessing" in pane.warning_label.text()
    qtbot.waitUntil(lambda: not pane.thumbnails.busy, timeout=10000)  # no thumbnail worker left running
