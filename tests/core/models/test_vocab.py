"""Shipped class vocabularies (checked against timm's own ImageNet metadata) and class-name files."""
from __future__ import annotations

import hashlib
import importlib.metadata
import re

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.models.vocab import list_vocabularies, load_vocabulary, read_class_file
from nemo_desktop.core.base.resources import resource_path


def test_sizes_and_imagenet_coverage():
    sizes = {name: (len(load_vocabulary(name)), len(load_vocabulary(name).imagenet_mask()))
             for name in list_vocabularies()}
    assert sizes == {"imagenet-1k": (1000, 1000), "imagenet-r": (200, 200), "objectnet": (113, 125),
                     "imagenet-d": (113, 125)}


def test_imagenet_names_are_first_wordnet_lemmas_in_timm_order():
    timm_data = pytest.importorskip("timm.data")
    vocab = load_vocabulary("imagenet-1k")
    info = timm_data.ImageNetInfo("imagenet-1k")
    assert list(vocab.wnids) == info.label_names()  # independent source for the index order
    assert list(vocab.names) == [d.split(", ")[0] for d in info.label_descriptions()]
    assert vocab.names[:3] == ("tench", "goldfish", "great white shark") and vocab.names[999] == "toilet tissue"
    assert vocab.names[134] == vocab.names[517] == "crane"  # the documented name clash


def _timm_info_lines(name: str) -> list[str]:
    path = importlib.metadata.distribution("timm").locate_file(f"timm/data/_info/{name}")
    return path.read_text().split()


def test_imagenet_r_matches_timm_files():
    vocab = load_vocabulary("imagenet-r")
    assert list(vocab.wnids) == _timm_info_lines("imagenet_r_synsets.txt")
    assert [g[0] for g in vocab.imagenet_indices] == [int(x) for x in _timm_info_lines("imagenet_r_indices.txt")]
    full = load_vocabulary("imagenet-1k")
    assert all(full.wnids[g[0]] == w for g, w in zip(vocab.imagenet_indices, vocab.wnids))
    assert all(full.names[g[0]] == n for g, n in zip(vocab.imagenet_indices, vocab.names))


def test_objectnet_and_imagenet_d_share_one_class_set():
    objectnet, imagenet_d = load_vocabulary("objectnet"), load_vocabulary("imagenet-d")
    assert sorted(map(sorted, objectnet.imagenet_indices)) == sorted(map(sorted, imagenet_d.imagenet_indices))
    assert objectnet.names[0] == "Alarm clock" and objectnet.imagenet_indices[0] == (409, 530)
    assert imagenet_d.index_of("binder_closed") == 8 and imagenet_d.names[8] == "binder (closed)"


def test_imagenet_prediction_maps_back_to_benchmark_classes():
    objectnet = load_vocabulary("objectnet")
    assert objectnet.from_imagenet_index(409) == objectnet.from_imagenet_index(530) == objectnet.index_of("alarm_clock")
    assert objectnet.from_imagenet_index(0) is None  # tench is no ObjectNet class
    r = load_vocabulary("imagenet-r")
    assert r.from_imagenet_index(1) == 0 and r.index_of("goldfish") == 0 and r.index_of("n01443537") == 0
    with pytest.raises(KeyError):
        r.index_of("spaceship")


def test_aliases_and_unknown_names():
    assert load_vocabulary("ImageNet_R") is load_vocabulary("imagenet-r")
    assert load_vocabulary("imagenet1k") is load_vocabulary("imagenet-1k")
    with pytest.raises(ConfigError) as info:
        load_vocabulary("imagenet-x")
    assert "imagenet-r" in info.value.hint


def test_shipped_files_match_their_readme():
    readme = resource_path("vocab", "README.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| (\S+\.tsv) \|.*\| ([0-9a-f]{64}) \|$", readme, flags=re.M))
    assert len(listed) == 4
    for name, digest in listed.items():
        assert hashlib.sha256(resource_path("vocab", name).read_bytes()).hexdigest() == digest, name


def test_read_class_file_text(tmp_path):
    f = tmp_path / "classes.txt"
    f.write_bytes("\ufeffcat\r\n  dog \r\nhot air balloon\n\n\n".encode("utf-8"))
    assert read_class_file(f) == ["cat", "dog", "hot air balloon"]


@pytest.mark.parametrize("content, message", [("cat\n\ndog\n", "Line 2"), ("\n\n", "no classes"),
                                              ("", "no classes")])
def test_read_class_file_rejects_gaps_and_empty_files(tmp_path, content, message):
    f = tmp_path / "classes.txt"
    f.write_text(content)
    with pytest.raises(ConfigError, match=message):
        read_class_file(f)


def test_read_class_file_json_and_missing(tmp_path):
    (tmp_path / "a.json").write_text('["cat", "dog"]')
    (tmp_path / "b.json").write_text('{"1": "dog", "0": "cat"}')
    (tmp_path / "c.json").write_text('{"0": "cat", "2": "dog"}')
    assert read_class_file(tmp_path / "a.json") == read_class_file(tmp_path / "b.json") == ["cat", "dog"]
    with pytest.raises(ConfigError, match="without gaps"):
        read_class_file(tmp_path / "c.json")
    with pytest.raises(ConfigError, match="not found"):
        read_class_file(tmp_path / "missing.txt")
