"""Model manager pane: the real catalog in a table, with each model's status read from the local cache."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from nemo_desktop.core.models.catalog import get_entry, list_catalog

pytestmark = pytest.mark.gui


def _fake_cached_snapshot(hub_cache, repo_id, files):
    """A repository laid out as huggingface_hub caches it: blobs, refs/main, snapshots/<commit>/."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = hub_cache / ("models--" + repo_id.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (folder / "blobs").mkdir()
    for name, data in files.items():
        blob = folder / "blobs" / f"blob-{name}"
        blob.write_bytes(data)
        (snapshot / name).symlink_to(blob)


def _column(model, col):
    return [model.index(r, col).data() for r in range(model.rowCount())]


def test_model_manager_lists_the_catalog_with_cache_status(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    resnet = get_entry("resnet50")
    _fake_cached_snapshot(tmp_path / "hf" / "hub", resnet.repo,
                          {"config.json": b"{}", "model.safetensors": b"\0" * 64})

    window = make_window()
    window.show()
    pane = window.show_pane("model_manager")
    qtbot.waitUntil(lambda: pane.model.rowCount() > 0, timeout=10000)

    entries = list_catalog()
    ids = [i.replace("  ★", "") for i in _column(pane.proxy, 0)]
    assert sorted(ids) == sorted(e.id for e in entries)
    status = dict(zip(ids, _column(pane.proxy, 2)))
    assert status["resnet50"] == "downloaded"
    assert {s for i, s in status.items() if i != "resnet50"} == {"not downloaded"}
    assert str(tmp_path / "hf" / "hub") in pane.status_label.text()
    assert "1 on this computer" in pane.status_label.text()

    # Gated models and estimates are visible as such.
    gated = dict(zip(ids, _column(pane.proxy, 6)))
    assert {i for i, g in gated.items() if g == "yes"} == {e.id for e in entries if e.gated}
    vram = dict(zip(ids, _column(pane.proxy, 4)))
    estimated = next(e for e in entries if "vram_bf16_gb" in e.estimated)
    assert vram[estimated.id].startswith("≈ ")

    # Sorting by size puts the smallest model first.
    pane.table.sortByColumn(3, Qt.SortOrder.AscendingOrder)
    smallest = min(entries, key=lambda e: e.disk_size_bytes)
    assert pane.proxy.index(0, 0).data().replace("  ★", "") == smallest.id
