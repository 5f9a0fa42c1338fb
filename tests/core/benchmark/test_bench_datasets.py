"""Dataset adapters on tiny copies of each benchmark's real layout, and the evaluation protocols."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from bench_world import CodedImageNetClassifier, CodedZeroShot, coded_image, make_imagenet_val, read_code, save
from nemo_desktop.core.benchmark.datasets import (ImageNetD, ImageNetR, ObjectNet, is_imagenet1k_classifier,
                                                  open_benchmark_dataset, open_imagenet_subset)
from nemo_desktop.core.benchmark.views import ClassifierView
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.models.vocab import load_vocabulary


def predictions(adapted, dataset):
    images = [Image.open(s.path).convert("RGB") for s in dataset.samples]
    return adapted.classifier.predict_proba(images).argmax(axis=1).tolist()


def wrong_ids(adapted, dataset):
    preds = predictions(adapted, dataset)
    return sorted(s.sample_id for s, p, y in zip(dataset.samples, preds, adapted.labels) if p != y)


def test_codes_survive_jpeg(tmp_path):
    for seen, true in ((0, 999), (409, 530), (765, 17)):
        img = Image.open(save(coded_image(seen, true, tint=5), tmp_path / f"{seen}.jpg"))
        assert (read_code(img, 0), read_code(img, 2)) == (seen, true)


def test_imagenet_r_layout_and_masked_protocol(bench_data):
    info = bench_data["imagenet-r"]
    ds = open_benchmark_dataset("imagenet-r", info["root"].parent)  # the parent of imagenet-r/ works too
    assert isinstance(ds, ImageNetR) and ds.root == info["root"]
    assert len(ds) == info["total"] and len(ds.class_names) == 200
    assert ds.class_names[0] == "goldfish" and ds.samples[0].sample_id.startswith("n01443537/")
    adapted = ds.adapt(CodedImageNetClassifier())
    view = adapted.classifier
    assert isinstance(view, ClassifierView) and len(view.class_names) == 200
    assert view.info.model_id == "test-double:coded-imagenet#imagenet-r"
    assert wrong_ids(adapted, ds) == info["wrong"]
    # The 200-way probabilities are the softmax over the 200 masked logits.
    img = Image.open(ds.samples[0].path).convert("RGB")
    full = CodedImageNetClassifier().logits([img])[0].astype(np.float64)
    mask = load_vocabulary("imagenet-r").imagenet_mask()
    z = full[mask] - full[mask].max()
    np.testing.assert_allclose(view.predict_proba([img])[0], np.exp(z) / np.exp(z).sum(), rtol=1e-5)


def test_objectnet_layout_overlap_and_multi_index_classes(bench_data):
    info = bench_data["objectnet"]
    ds = open_benchmark_dataset("objectnet", info["root"])  # objectnet-1.0: its images/ folder is used
    assert isinstance(ds, ObjectNet) and ds.root == info["root"] / "images"
    assert all(not s.sample_id.startswith(info["other"]) for s in ds.samples)
    assert any("do not overlap" in n for n in ds.notes)
    adapted = ds.adapt(CodedImageNetClassifier())
    # 530 (digital clock) maps to "Alarm clock"; a top-1 at 0 (tench) is outside the 125 columns: masked away.
    assert wrong_ids(adapted, ds) == info["wrong"]
    assert info["masked_row"] not in wrong_ids(adapted, ds)
    assert len(adapted.classifier.class_names) == 113
    assert sum(len(g) for g in adapted.classifier.groups) == 125


def test_imagenet_d_splits_and_index_list_protocol(bench_data):
    info = bench_data["imagenet-d"]
    ds = open_benchmark_dataset("imagenet-d", info["root"])
    assert isinstance(ds, ImageNetD) and ds.splits == ["background", "texture", "material"]
    assert {s.split for s in ds.samples} == {"background", "texture", "material"}
    adapted = ds.adapt(CodedImageNetClassifier())
    view = adapted.classifier
    assert len(view.class_names) == 113 + (1000 - 125)  # every other ImageNet class stays a prediction
    assert wrong_ids(adapted, ds) == info["wrong"]
    # A sample predicted as an ImageNet class outside the 113 is explained as that class.
    chair_0 = next(s for s in ds.samples if read_code(Image.open(s.path), 0) == 0)
    pred = view.predict_proba([Image.open(chair_0.path).convert("RGB")]).argmax()
    assert view.class_names[pred] == "tench"
    only = ImageNetD(info["root"], splits=["texture"])
    assert {s.split for s in only.samples} == {"texture"}
    with pytest.raises(ConfigError, match="Unknown ImageNet-D split"):
        ImageNetD(info["root"], splits=["weather"])


def test_zero_shot_classifiers_get_readable_names(bench_data):
    zs = CodedZeroShot()
    ds = open_benchmark_dataset("objectnet", bench_data["objectnet"]["root"])
    adapted = ds.adapt(zs)
    assert adapted.classifier is zs and zs.class_names[0] == "Alarm clock"
    assert wrong_ids(adapted, ds) == bench_data["objectnet"]["wrong"]
    d = open_benchmark_dataset("imagenet-d", bench_data["imagenet-d"]["root"]).adapt(zs)
    assert "binder (closed)" in zs.class_names and len(zs.class_names) == 113
    assert d.from_imagenet(409) == zs.class_names.index("alarm clock")
    r = open_benchmark_dataset("imagenet-r", bench_data["imagenet-r"]["root"]).adapt(zs)
    assert zs.class_names[1] == "great white shark" and r.from_imagenet(0) is None  # tench is not an R class


def test_non_imagenet_classifiers_are_refused(bench_data):
    class Ten(CodedImageNetClassifier):
        def __init__(self):
            super().__init__()
            self.class_names = [f"c{i}" for i in range(10)]

    assert is_imagenet1k_classifier(CodedImageNetClassifier()) and not is_imagenet1k_classifier(Ten())
    with pytest.raises(ConfigError, match="not ImageNet-1k"):
        open_benchmark_dataset("imagenet-r", bench_data["imagenet-r"]["root"]).adapt(Ten())


def test_empty_or_wrong_folders_say_what_to_do(tmp_path):
    (tmp_path / "cats").mkdir()
    with pytest.raises(ConfigError, match="No ImageNet-R images") as exc:
        ImageNetR(tmp_path)
    assert "WordNet id" in exc.value.hint
    with pytest.raises(ConfigError, match="not found"):
        ObjectNet(tmp_path / "nope")
    with pytest.raises(ConfigError, match="Unknown benchmark dataset kind"):
        open_benchmark_dataset("imagenet-z", tmp_path)


def test_generic_folder_dataset_uses_the_classifiers_classes(tmp_path):
    vocab = load_vocabulary("imagenet-1k")
    save(coded_image(1, 1), tmp_path / "goldfish" / "a.png")
    save(coded_image(2, 1), tmp_path / "goldfish" / "b.png")
    save(coded_image(2, 2), tmp_path / "great_white_shark" / "c.png")
    ds = open_benchmark_dataset("folder", tmp_path, criterion="the colour", name="mine")
    adapted = ds.adapt(CodedImageNetClassifier())
    assert adapted.labels == [1, 1, 2] and adapted.from_imagenet(7) == 7
    assert wrong_ids(adapted, ds) == ["goldfish/b.png"]
    zs = CodedZeroShot()
    z = ds.adapt(zs)
    assert zs.class_names == ["goldfish", "great white shark"] and z.from_imagenet(vocab.names.index("goldfish")) == 0


def test_imagenet_val_subset_layouts(tmp_path):
    folder = make_imagenet_val(tmp_path / "a", ["n01532829", "n01558993", "n01440764"], per_class=3)
    sub = open_imagenet_subset(folder, "mini-imagenet", per_class=2)
    vocab = load_vocabulary("imagenet-1k")
    # tench (n01440764) is not a mini-ImageNet class
    assert sorted({i for _, i in sub.items}) == sorted(vocab.wnids.index(w) for w in ("n01532829", "n01558993"))
    assert len(sub.items) == 4 and sub.describe()["class_count"] == 2
    assert len(open_imagenet_subset(folder, "all").items) == 9
    listed = tmp_path / "mine.txt"
    listed.write_text("n01440764\n")
    assert {i for _, i in open_imagenet_subset(folder, str(listed)).items} == {0}
    # Kaggle's flat layout with LOC_val_solution.csv beside the folder.
    flat = tmp_path / "kaggle" / "val"
    save(coded_image(0, 0), flat / "ILSVRC2012_val_00000001.JPEG")
    save(coded_image(7, 7), flat / "ILSVRC2012_val_00000002.JPEG")
    (flat.parent / "LOC_val_solution.csv").write_text(
        "ImageId,PredictionString\nILSVRC2012_val_00000001,n01440764 1 2 3 4\n"
        f"ILSVRC2012_val_00000002,{vocab.wnids[7]} 5 6 7 8\n")
    assert sorted(i for _, i in open_imagenet_subset(flat, "all").items) == [0, 7]
    bad = tmp_path / "bad.txt"
    bad.write_text("n99999999\n")
    with pytest.raises(ConfigError, match="not ImageNet-1k classes"):
        open_imagenet_subset(folder, str(bad))


def test_objectnet_border_is_cropped_on_load(tmp_path):
    """Like the standard ObjectNet loaders: 2 pixels per side, for every loader of a file under the dataset."""
    from nemo_desktop.core.base.image_borders import border_for, register_border_crop
    from nemo_desktop.core.base.images import load_image

    vocab = load_vocabulary("objectnet")
    framed = np.full((40, 60, 3), 128, np.uint8)
    framed[:2], framed[-2:], framed[:, :2], framed[:, -2:] = (255, 0, 0), (255, 0, 0), (255, 0, 0), (255, 0, 0)
    path = save(Image.fromarray(framed), tmp_path / "objectnet-1.0" / "images" / vocab.folders[0] / "a.png")
    outside = save(Image.fromarray(framed), tmp_path / "elsewhere" / "a.png")
    assert load_image(path).size == (60, 40)  # nothing registered yet
    try:
        ds = ObjectNet(tmp_path / "objectnet-1.0")
        assert ds.describe()["border_crop"] == 2 and border_for(path) == 2 and border_for(outside) == 0
        img = load_image(path)
        assert img.size == (56, 36)
        arr = np.asarray(img)
        assert (arr == 128).all()  # no red left
        assert load_image(outside).size == (60, 40)
        assert load_image(path, max_side=30).size[0] <= 30  # the crop also applies to reduced decodes
        with open(path, "rb") as f:
            assert load_image(f.read()).size == (60, 40)  # bytes have no path: nothing to crop
    finally:
        register_border_crop(tmp_path / "objectnet-1.0" / "images", 0)
    assert border_for(path) == 0
