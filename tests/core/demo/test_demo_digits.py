"""The first-run demo builder: a real digits dataset and a real small timm classifier, deterministic and
idempotent, registered so it loads through the timm loader like any user checkpoint."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from nemo_desktop.core.demo import digits
from nemo_desktop.core.store.paths import get_paths

from demo_cache import built_demo, install_built_demo


def _tree_hash(folder):
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*.png")):
        h.update(p.relative_to(folder).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def test_dataset_is_deterministic_and_one_folder_per_class(tmp_path):
    a, reused_a = digits.ensure_dataset(tmp_path / "a")
    b, reused_b = digits.ensure_dataset(tmp_path / "b")
    assert not reused_a and not reused_b
    assert sorted(p.name for p in a.iterdir() if p.is_dir()) == sorted(digits.CLASS_NAMES)
    files = sorted(a.glob("*/*.png"))
    assert len(files) == 360  # the renderer's eval pool: index % 5 == 0 of the 1,797 shipped digits
    assert _tree_hash(a) == _tree_hash(b)
    from PIL import Image

    with Image.open(files[0]) as im:
        assert im.size == (digits.IMAGE_SIDE, digits.IMAGE_SIDE) and im.mode == "RGB"
    assert not list(tmp_path.glob(".*partial"))  # built aside, renamed into place


def test_dataset_is_reused_and_rebuilt_when_damaged(tmp_path):
    folder, _ = digits.ensure_dataset(tmp_path / "d")
    before = _tree_hash(folder)
    stamp = (folder / digits.MANIFEST).stat().st_mtime_ns
    assert digits.ensure_dataset(folder) == (folder, True)
    assert (folder / digits.MANIFEST).stat().st_mtime_ns == stamp
    next(folder.glob("three/*.png")).unlink()  # a user deleted an image: the demo is written again
    assert digits.ensure_dataset(folder) == (folder, False)
    assert _tree_hash(folder) == before


def test_training_is_deterministic():
    torch = pytest.importorskip("torch")
    a, ma = digits.train_classifier(epochs=1)
    b, mb = digits.train_classifier(epochs=1)
    assert ma["holdout_accuracy"] == mb["holdout_accuracy"]
    for (ka, ta), (kb, tb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(ta, tb), ka


def test_prepare_registers_a_classifier_that_loads_through_the_timm_loader():
    from nemo_desktop.core.models.catalog import get_entry
    from nemo_desktop.core.models.downloads import entry_status
    from nemo_desktop.core.models.families import load_model

    paths = get_paths()
    install_built_demo(paths)
    setup = digits.prepare_demo(paths)
    assert setup.reused_dataset and setup.reused_classifier  # idempotent: the second call trains nothing
    assert (setup.classifier_dir / "model.safetensors").is_file()
    config = json.loads((setup.classifier_dir / "config.json").read_text())
    assert config["architecture"] == digits.ARCHITECTURE
    assert config["pretrained_cfg"]["input_size"] == [3, 32, 32]

    entry = get_entry(digits.CLASSIFIER_ID)
    assert entry.origin != "shipped" and entry.family == "timm" and entry.source.startswith("local-dir:")
    assert entry_status(entry).status == "local"
    model = load_model(digits.CLASSIFIER_ID)
    assert type(model).__name__ == "TimmClassifier"
    assert model.class_names == list(digits.CLASS_NAMES)  # from the saved config, not from an option

    # Accuracy through the loaded classifier on the dataset's held-out PNGs (chance is 10 %).
    from PIL import Image

    files = sorted(setup.dataset_dir.glob("*/*.png"))
    images = [Image.open(p).convert("RGB") for p in files]
    truth = np.array([digits.CLASS_NAMES.index(p.parent.name) for p in files])
    accuracy = float((model.predict_proba(images).argmax(1) == truth).mean())
    print(f"demo classifier: {100 * accuracy:.1f}% of {len(files)} held-out digits through the timm loader")
    assert accuracy > 0.8
    assert accuracy == pytest.approx(setup.holdout_accuracy, abs=0.01)  # the same preprocessing as training
    assert 0 < (model.predict_proba(images).argmax(1) != truth).sum()  # real mistakes to explain


def test_registering_again_replaces_the_entry_and_keeps_others(tmp_path):
    from nemo_desktop.core.models.catalog import list_catalog, user_catalog_path
    from nemo_desktop.core.models.user_catalog import put_user_entry

    paths = get_paths()
    install_built_demo(paths)
    other = dict(digits.catalog_entry(digits.classifier_dir(paths)), id="my-own-model")
    put_user_entry(other)
    digits.register_classifier(digits.classifier_dir(paths))
    digits.register_classifier(digits.classifier_dir(paths))
    ids = [e["id"] for e in json.loads(user_catalog_path().read_text())["entries"]]
    assert ids == ["my-own-model", digits.CLASSIFIER_ID]
    assert {e.id for e in list_catalog("classifier")} >= {"my-own-model", digits.CLASSIFIER_ID}


def test_a_shipped_id_is_refused():
    from nemo_desktop.core.base.errors import ConfigError
    from nemo_desktop.core.models.catalog import list_catalog
    from nemo_desktop.core.models.user_catalog import put_user_entry

    paths = get_paths()
    install_built_demo(paths)
    shipped = next(e.id for e in list_catalog("classifier") if e.origin == "shipped")
    with pytest.raises(ConfigError, match="shipped catalog"):
        put_user_entry(dict(digits.catalog_entry(digits.classifier_dir(paths)), id=shipped))


def test_the_cached_build_measured_above_chance():
    setup = built_demo()[2]
    assert setup["train_images"] == 1437 and setup["images"] == 360
    assert setup["holdout_accuracy"] > 0.8
