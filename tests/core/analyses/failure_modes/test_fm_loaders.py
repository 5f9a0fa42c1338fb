"""Plumbing through the real loaders (tiny random open_clip / HF CLIP / SigLIP / timm models saved and loaded
like real checkpoints): the joint space is the classifier itself when it is zero-shot (the index features
are reused, no image is embedded again), else an injected embedder whose image embeddings are stored once
per (index, embedder) and sentence embeddings once per sentence set."""
from __future__ import annotations

import numpy as np
import pytest

from fixtures_tiny.classifiers import (OPEN_CLIP_TINY_NAME, TINY_CLASSES, build_tiny_clip, build_tiny_open_clip,
                                       build_tiny_siglip, build_tiny_timm)
from fixtures_tiny.images import write_random_reference
from nemo_desktop.core.analyses.failure_modes import FailureModesConfig, FailureModesPipeline, FailureModesResult
from nemo_desktop.core.data.datasets import FolderDataset
from nemo_desktop.core.data.reference_index import build_index
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

pytest.importorskip("torch")
CPU = LoadOptions(device="cpu")
NAMES = {"class_names": TINY_CLASSES}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("fm-tiny")
    ref, _ = write_random_reference(root / "data", TINY_CLASSES, per_class=6)
    return {"data": ref, "timm": build_tiny_timm(root / "timm", label_names=TINY_CLASSES),
            "clip": build_tiny_clip(root / "clip"), "siglip": build_tiny_siglip(root / "siglip"),
            **build_tiny_open_clip(root / "open_clip")}


class Counting:
    """Wraps a loaded model's embed/embed_texts to count calls (everything else passes through)."""

    def __init__(self, model):
        self._m, self.images, self.text_calls = model, 0, 0

    def __getattr__(self, name):
        return getattr(self._m, name)

    def embed(self, images):
        self.images += len(images)
        return self._m.embed(images)

    def embed_texts(self, texts):
        self.text_calls += 1
        return self._m.embed_texts(texts)


def _check(result: FailureModesResult, k: int, clusters: int):
    assert FailureModesResult.from_dict(result.to_dict()) == result
    (g,) = result.groups
    rows = [r for c in g.hard_clusters for r in c.rows]
    assert len(rows) == len(set(rows)) == g.split["hard"] and 0 < len(g.hard_clusters) <= clusters
    for c in g.hard_clusters:
        for m in result.methods:
            assert len({p["index"] for p in c.sentences[m]}) == k


def test_zero_shot_classifier_is_its_own_joint_space(tiny, store):
    clf = Counting(load_model(ModelSpec("classifier", "open_clip", f"local-dir:{tiny['local_dir']}", options=NAMES),
                              CPU))
    index = build_index(FolderDataset(tiny["data"]), clf, store)
    seen = clf.images
    assert index.features.shape == (60, 24)
    cfg = FailureModesConfig(clusters=4, k=3)
    result = FailureModesPipeline(clf, None, store, cfg)(index)
    assert clf.images == seen  # no image embedded again: the index features are the joint embeddings
    assert result.manifest["joint_space"] == "classifier" and result.manifest["joint_embeddings"] == "index-features"
    assert clf.text_calls == 1 and result.groups[0].tau == 0.25
    _check(result, 3, 4)
    FailureModesPipeline(clf, None, store, FailureModesConfig(clusters=3, k=2))(index)
    assert clf.text_calls == 1  # the sentence set's embeddings come from the store


@pytest.mark.parametrize("family", ["hf-clip", "hf-siglip", "open_clip"])
def test_injected_embedder_images_stored_once(tiny, store, family):
    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{tiny['timm']}"), CPU)
    index = build_index(FolderDataset(tiny["data"]), clf, store)
    specs = {"hf-clip": ModelSpec("classifier", "hf-clip", str(tiny["clip"]), options=NAMES),
             "hf-siglip": ModelSpec("classifier", "hf-siglip", str(tiny["siglip"]), options=NAMES),
             "open_clip": ModelSpec("classifier", "open_clip", f"{OPEN_CLIP_TINY_NAME}@{tiny['checkpoint']}",
                                    options={**NAMES, "config_dir": str(tiny["config_dir"])})}
    emb = Counting(load_model(specs[family], CPU))
    cfg = FailureModesConfig(clusters=4, k=3, tau=None)
    result = FailureModesPipeline(clf, emb, store, cfg)(index)
    assert emb.images == len(index) and emb.text_calls == 1
    assert result.manifest["joint_space"] == "embedder" and result.groups[0].tau_source == "auto"
    rec = store.find("failure-modes-embeddings")[0]
    matrix = store.open_array(rec.payload["array"])
    assert matrix.shape[0] == len(index) and np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert not list(store.arrays_dir.glob("fmjoint-*-chunk-*.npy"))  # chunks consumed by the final matrix
    _check(result, 3, 4)
    again = FailureModesPipeline(clf, emb, store, FailureModesConfig(clusters=5, k=2, tau=None))(index)
    assert emb.images == len(index) and emb.text_calls == 1 and again.manifest["joint_embeddings"] == "store"
    _check(again, 2, 5)
