from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from nemo_desktop.core.data.datasets import (CsvManifestDataset, FolderDataset, LabelMapping, normalise_class_name,
                                             open_dataset)
from nemo_desktop.core.base.errors import ConfigError


def _img(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (10, 20, 30)).save(path)
    return path


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "ds"
    _img(root / "zebra" / "a.png")
    _img(root / "zebra" / "nested" / "b.jpg")
    _img(root / "Great_White-Shark" / "c.png")
    _img(root / "goldfish" / "d.png")
    (root / "goldfish" / "notes.txt").write_text("not an image")
    _img(root / "goldfish" / ".hidden" / "e.png")
    _img(root / ".cache" / "f.png")
    (root / "empty_class").mkdir()
    return root


def test_folder_dataset_uses_sorted_folder_names(folder):
    ds = FolderDataset(folder)
    assert ds.class_names == ["Great_White-Shark", "empty_class", "goldfish", "zebra"]
    got = {(p.relative_to(folder).as_posix(), label) for p, label in ((it.path, it.label) for it in ds)}
    assert got == {("Great_White-Shark/c.png", 0), ("goldfish/d.png", 2), ("zebra/a.png", 3),
                   ("zebra/nested/b.jpg", 3)}
    assert len(ds) == 4 and ds.root == folder.resolve() and ds.kind == "folder"


def test_folder_dataset_maps_onto_a_classifier_vocabulary(folder):
    vocab = ["tench, Tinca tinca", "goldfish, Carassius auratus", "great white shark, white shark", "zebra",
             "empty class"]
    ds = FolderDataset(folder, vocab)
    labels = {p.name: label for p, label in ((it.path, it.label) for it in ds)}
    # exact ("zebra"), synonym + normalised ("goldfish", "Great_White-Shark"), normalised ("empty_class")
    assert labels == {"c.png": 2, "d.png": 1, "a.png": 3, "b.jpg": 3}
    assert ds.class_names == vocab


def test_unmatched_folders_are_listed_in_the_error(folder):
    with pytest.raises(ConfigError) as err:
        FolderDataset(folder, ["zebra", "goldfish"])
    msg = err.value.message
    assert "2 class folders" in msg and "'Great_White-Shark'" in msg and "'empty_class'" in msg
    assert "'zebra'" not in msg and "'goldfish'" not in msg
    assert err.value.hint


def test_skip_unmatched_keeps_the_matching_classes(folder):
    ds = FolderDataset(folder, ["zebra", "goldfish"], skip_unmatched=True)
    assert sorted(p.name for p in ds.paths) == ["a.png", "b.jpg", "d.png"]
    assert set(ds.skipped_labels) == {"Great_White-Shark", "empty_class"}


def test_ambiguous_name_is_not_guessed():
    m = LabelMapping(["crane (bird)", "crane", "crane"])
    assert m.resolve("crane") == 1  # exact name wins (first occurrence)
    m = LabelMapping(["crane, bird", "crane, machine"])
    assert "ambiguous" in m.resolve("crane")


def test_wordnet_ids_map_to_imagenet_indices(tmp_path):
    _img(tmp_path / "n01443537" / "x.png")  # goldfish, ImageNet-1k index 1
    _img(tmp_path / "n01440764" / "y.png")  # tench, index 0
    from nemo_desktop.core.models.vocab import load_vocabulary

    names = list(load_vocabulary("imagenet-1k").names)
    ds = FolderDataset(tmp_path, names)  # an ImageNet-1k classifier: its WordNet ids are known
    assert {p.name: lab for p, lab in zip(ds.paths, ds.labels)} == {"x.png": 1, "y.png": 0}
    with pytest.raises(ConfigError, match="n01443537"):  # 1000 other classes: no guessing
        FolderDataset(tmp_path, [f"class {i}" for i in range(1000)])
    ds = FolderDataset(tmp_path, ["a", "b"], wnids=["n01443537", "n01440764"])
    assert {p.name: lab for p, lab in zip(ds.paths, ds.labels)} == {"x.png": 0, "y.png": 1}


def test_with_class_names_remaps_without_rescanning(folder):
    ds = FolderDataset(folder)
    mapped = ds.with_class_names(["zebra", "goldfish", "great white shark", "empty class"])
    assert type(mapped) is FolderDataset and len(mapped) == 4
    assert {p.name: lab for p, lab in zip(mapped.paths, mapped.labels)} == {
        "a.png": 0, "b.jpg": 0, "d.png": 1, "c.png": 2}
    assert ds.class_names[0] == "Great_White-Shark"  # the original is untouched


def test_csv_manifest_names_relative_paths_and_integer_labels(tmp_path):
    a = _img(tmp_path / "imgs" / "a.png")
    b = _img(tmp_path / "elsewhere" / "b.png")
    csv_path = tmp_path / "lists" / "manifest.csv"
    csv_path.parent.mkdir()
    csv_path.write_text(f"path,label\n../imgs/a.png,cat\n{b},dog\n\n../imgs/a.png,cat\n")
    ds = CsvManifestDataset(csv_path)
    assert ds.class_names == ["cat", "dog"]
    assert [(it.path, it.label) for it in ds] == [(a.resolve(), 0), (b.resolve(), 1), (a.resolve(), 0)]
    assert ds.root == csv_path.resolve() and ds.kind == "csv"

    csv_path.write_text("Label,Path,extra\n2,../imgs/a.png,x\n0,../elsewhere/b.png,y\n")
    ds = CsvManifestDataset(csv_path)
    assert ds.class_names == ["0", "1", "2"] and ds.labels == [2, 0]
    ds = CsvManifestDataset(csv_path, ["plane", "car", "bird"])
    assert ds.labels == [2, 0] and ds.class_names == ["plane", "car", "bird"]


def test_csv_manifest_errors(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("file,class\na.png,cat\n")
    with pytest.raises(ConfigError, match="no 'path' and 'label' columns"):
        CsvManifestDataset(p)
    p.write_text("path,label\na.png,\n")
    with pytest.raises(ConfigError, match="line 2"):
        CsvManifestDataset(p)
    p.write_text("path,label\na.png,7\nb.png,horse\n")
    with pytest.raises(ConfigError, match="'horse'") as err:
        CsvManifestDataset(p, ["cat", "dog"])
    assert "'7'" in err.value.message  # index 7 is outside a 2-class vocabulary


def test_open_dataset_dispatches_by_type(folder, tmp_path):
    assert isinstance(open_dataset(folder), FolderDataset)
    _img(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text("path,label\na.png,x\n")
    assert isinstance(open_dataset(tmp_path / "m.csv"), CsvManifestDataset)
    (tmp_path / "m.json").write_text("{}")
    with pytest.raises(ConfigError, match="neither a folder nor a .csv"):
        open_dataset(tmp_path / "m.json")
    with pytest.raises(ConfigError, match="not found"):
        open_dataset(tmp_path / "missing")


def test_normalise_class_name():
    assert normalise_class_name("  Great_White--Shark ") == "great white shark"
