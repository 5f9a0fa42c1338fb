"""The model catalog: every entry is complete and loads through a registered family; user entries."""
from __future__ import annotations

import json
import os

import pytest

from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.models.catalog import (get_entry, list_catalog, resolve_model_ref, user_catalog_path)
from nemo_desktop.core.models.families import KINDS, LoadOptions, ModelSpec, list_families, load_model

SHIPPED = list_catalog()
PAPER_IDS = {"vit-b16-augreg2", "clip-vit-b32", "siglip-b16", "qwen2.5-vl-7b", "flux-kontext-dev"}


def test_ids_are_unique_and_the_required_models_are_there():
    ids = [e.id for e in SHIPPED]
    assert len(ids) == len(set(ids))
    assert {"vit-b16-augreg2", "resnet50", "convnext-tiny", "clip-vit-b32", "siglip-b16", "open-clip-vit-b32-laion2b",
            "qwen2.5-vl-7b", "qwen2.5-vl-3b", "qwen2-vl-2b", "qwen3-vl-2b", "qwen3-vl-4b", "qwen3-vl-8b",
            "qwen3-vl-30b-a3b", "flux-kontext-dev", "qwen-image-edit", "instruct-pix2pix"} <= set(ids)
    assert {e.id for e in SHIPPED if e.paper_default} == PAPER_IDS
    assert {e.kind for e in SHIPPED} == set(KINDS)


@pytest.mark.parametrize("entry", SHIPPED, ids=lambda e: e.id)
def test_entry_is_complete(entry):
    assert entry.problems() == []
    assert entry.disk_size_bytes > 0 and entry.vram_bf16_gb > 0
    assert "/" in entry.repo and entry.revision
    assert entry.license and entry.recommended_gpu and entry.description
    assert "vram_bf16_gb" in entry.estimated  # VRAM is always an estimate, and says so


@pytest.mark.parametrize("entry", SHIPPED, ids=lambda e: e.id)
def test_entry_family_is_registered(entry):
    assert (entry.kind, entry.family) in list_families(entry.kind), f"no adapter registers {entry.family}"
    spec = entry.spec()
    assert isinstance(spec, ModelSpec)
    assert (spec.kind, spec.family, spec.catalog_id, spec.model_id) == (entry.kind, entry.family, entry.id, entry.id)
    assert spec.source == (entry.source or entry.repo) and spec.revision == entry.revision


@pytest.mark.parametrize("entry", [e for e in SHIPPED if e.parameters], ids=lambda e: e.id)
def test_sizes_agree_with_parameter_counts(entry):
    bytes_per_param = 4 if entry.kind == "classifier" else (2 if entry.kind == "mllm" else None)
    if bytes_per_param is None:
        assert entry.disk_size_bytes > entry.parameters  # editors: mixed fp32/bf16 components
        return
    assert entry.disk_size_bytes == pytest.approx(bytes_per_param * entry.parameters, rel=0.01)
    assert entry.vram_bf16_gb * 1e9 >= 2 * entry.parameters  # room for the bf16 weights at least


@pytest.mark.parametrize("entry", [e for e in SHIPPED if e.family == "timm"], ids=lambda e: e.id)
def test_timm_parameter_counts_are_those_of_the_architecture(entry):
    timm = pytest.importorskip("timm")
    torch = pytest.importorskip("torch")
    arch = entry.repo.split("/", 1)[1]
    with torch.device("meta"):
        model = timm.create_model(arch, pretrained=False)
    assert sum(p.numel() for p in model.parameters()) == entry.parameters


def test_gated_and_license_facts():
    flux = get_entry("flux-kontext-dev")
    assert flux.gated and "non-commercial" in flux.license and flux.license_url.endswith(flux.repo)
    assert not any(e.gated for e in SHIPPED if e.id not in ("flux-kontext-dev", "sd3.5-medium",
                                                            "llama-3.1-8b-instruct"))
    sd35 = get_entry("sd3.5-medium")
    assert sd35.gated and sd35.license == "stabilityai-ai-community" and sd35.kind == "generator"
    assert get_entry("qwen2.5-vl-3b").license == "qwen-research"


def test_unknown_id_lists_close_matches():
    with pytest.raises(ConfigError) as info:
        get_entry("vit-b16")
    assert "No model with id 'vit-b16'" in info.value.message and "vit-b16-augreg2" in info.value.hint
    assert get_entry("ViT-B16-AugReg2").id == "vit-b16-augreg2"


def test_resolve_model_ref():
    assert resolve_model_ref("clip-vit-b32", "classifier").catalog_id == "clip-vit-b32"
    spec = resolve_model_ref("timm:local-dir:/models/mine", "classifier")
    assert (spec.family, spec.source, spec.catalog_id) == ("timm", "local-dir:/models/mine", None)
    with pytest.raises(ConfigError, match="is a mllm, not a classifier"):
        resolve_model_ref("qwen2.5-vl-7b", "classifier")
    with pytest.raises(ConfigError, match="neither a catalog id") as info:
        resolve_model_ref("nope:thing", "classifier")
    assert "timm" in info.value.hint


def _write_user_catalog(entries) -> str:
    path = user_catalog_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"entries": entries}))
    return str(path)


def _user_entry(**overrides):
    entry = {"id": "my-net", "kind": "classifier", "family": "timm", "repo": "me/my-net", "revision": "main",
             "license": "apache-2.0", "gated": False, "disk_size_bytes": 1000, "vram_bf16_gb": 0.5,
             "recommended_gpu": "any", "description": "my fine-tuned net"}
    entry.update(overrides)
    return entry


def test_user_entries_add_and_override(tmp_path):
    assert user_catalog_path().is_relative_to(os.environ["NEMO_HOME"])
    folder = build_tiny_timm(tmp_path / "mine", label_names=TINY_CLASSES)
    path = _write_user_catalog([
        _user_entry(repo=str(folder), source=f"local-dir:{folder}"),
        _user_entry(id="resnet50", description="my own resnet50 entry"),
    ])
    assert get_entry("my-net").origin == path and get_entry("resnet50").description == "my own resnet50 entry"
    assert len(list_catalog()) == len(SHIPPED) + 1
    clf = load_model("my-net", LoadOptions(device="cpu"))  # catalog -> registry -> adapter
    assert clf.info.model_id == "my-net" and clf.class_names == TINY_CLASSES


@pytest.mark.parametrize("bad, message", [
    (_user_entry(disk_size_bytes=0), "disk_size_bytes"),
    (_user_entry(kind="detector"), "kind"),
    ({k: v for k, v in _user_entry().items() if k != "license"}, "missing license"),
    (_user_entry(gpu="4090"), "unknown gpu"),
])
def test_invalid_user_entries_name_the_file_and_the_field(bad, message):
    path = _write_user_catalog([bad])
    with pytest.raises(ConfigError, match=message) as info:
        list_catalog()
    assert path in info.value.message


def test_unreadable_user_catalog_is_a_clear_error():
    path = user_catalog_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="Cannot read the model catalog"):
        get_entry("resnet50")
