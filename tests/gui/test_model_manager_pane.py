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


# -- download, cancel, resume, delete (against the local Hub of tests/fixtures_tiny/hub_server.py) --------

import json  # noqa: E402

from fixtures_tiny.hub_server import FakeHub, FakeRepo  # noqa: E402

# huggingface_hub reports a file's bytes in 10 MB steps, so a download is cancelled between files: many small
# shards, throttled, give it time to.
SHARD = bytes(range(256)) * 512  # 128 KiB
SHARDS = {f"model-{i:05d}-of-00024.safetensors": SHARD for i in range(1, 25)}


def _write_user_catalog(home, entries):
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "catalog.json").write_text(json.dumps({"entries": entries}))


def _entry(**kw):
    base = {"id": "tiny-download", "kind": "classifier", "family": "timm", "repo": "org/tiny", "revision": "main",
            "license": "mit", "gated": False, "disk_size_bytes": 24 * len(SHARD) + 2, "vram_bf16_gb": 0.1,
            "recommended_gpu": "any", "description": "a tiny repository on the local test Hub"}
    return {**base, **kw}


@pytest.fixture
def hub(monkeypatch, tmp_path):
    from huggingface_hub import constants

    server = FakeHub().start()
    server.repos["org/tiny"] = FakeRepo({"config.json": b"{}", **SHARDS})
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield server
    server.stop()


def _manager(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    pane = window.show_pane("model_manager")
    qtbot.waitUntil(lambda: pane.model.rowCount() > 0, timeout=20000)
    return pane


def _status(pane, entry_id):
    return pane.model.status_text(pane.model.rows[pane.model.row_of(entry_id)])


def test_download_shows_progress_cancels_resumes_and_deletes(qtbot, make_window, gui_home, hub, monkeypatch):
    _write_user_catalog(gui_home, [_entry()])
    pane = _manager(qtbot, make_window())
    assert pane.select("tiny-download")
    assert _status(pane, "tiny-download") == "not downloaded" and pane.download_button.isEnabled()

    hub.throttle = (8192, 0.03)
    statuses = []
    handle = pane.download_selected()
    handle.sig_progress.connect(lambda p: statuses.append(_status(pane, "tiny-download")))
    qtbot.waitUntil(lambda: any(s.startswith("downloading") and s.endswith("%") and s != "downloading 0%"
                                for s in statuses), timeout=20000)
    assert pane.cancel_button.isEnabled() and not pane.download_button.isEnabled()
    with qtbot.waitSignal(handle.sig_cancelled, timeout=20000):
        pane.cancel_button.click()
    qtbot.waitUntil(lambda: not _status(pane, "tiny-download").startswith("downloading"), timeout=10000)
    assert _status(pane, "tiny-download") in ("not downloaded", "partial") or \
        _status(pane, "tiny-download").startswith("partial")

    hub.throttle = None
    with qtbot.waitSignal(pane.download("tiny-download").sig_done, timeout=20000):
        pass
    qtbot.waitUntil(lambda: _status(pane, "tiny-download") == "downloaded", timeout=10000)
    qtbot.waitUntil(lambda: "org/tiny" in pane.disk_panel.summary.text() or
                    pane.disk_panel.table.rowCount() == 1, timeout=10000)
    assert pane.disk_panel.table.item(0, 0).text() == "org/tiny"
    assert pane.disk_panel.table.item(0, 2).text() == "tiny-download"

    asked = []
    monkeypatch.setattr(pane, "confirm", lambda title, text: asked.append(text) or True)
    pane.select("tiny-download")
    with qtbot.waitSignal(pane.delete_selected().sig_done, timeout=10000):
        pass
    assert asked and "org/tiny" in asked[0]
    qtbot.waitUntil(lambda: _status(pane, "tiny-download") == "not downloaded", timeout=10000)
    assert not (gui_home.parent / "hf" / "hub" / "models--org--tiny").exists()


def test_a_download_gets_the_token_of_the_settings_reference_not_through_the_environment(hub, gui_home, monkeypatch):
    import os

    from nemo_desktop.core.base.job_context import JobContext
    from nemo_desktop.gui.panes.model_manager.catalog_rows import download_entry

    token = "hf_allowedTOKENforTESTS"
    hub.repos["org/gated"] = FakeRepo({"config.json": b"{}", "model.safetensors": b"g" * 100}, gated=True,
                                      allowed_tokens={token})
    _write_user_catalog(gui_home, [_entry(id="tiny-gated", repo="org/gated", gated=True, disk_size_bytes=102)])
    monkeypatch.setenv("MY_HF_TOKEN", token)
    env_before = dict(os.environ)
    path = download_entry(get_entry("tiny-gated"), "env:MY_HF_TOKEN", JobContext())
    assert path.endswith(hub.repos["org/gated"].sha)
    assert dict(os.environ) == env_before and "HF_TOKEN" not in os.environ


# -- import, load, unload -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm, write_class_file

    root = tmp_path_factory.mktemp("tiny_timm")
    folder = build_tiny_timm(root / "model", input_size=32)
    return {"weights": folder / "model.safetensors", "classes": write_class_file(root / "classes.txt", TINY_CLASSES),
            "three_classes": write_class_file(root / "three.txt", TINY_CLASSES[:3])}


def test_import_a_checkpoint_load_and_unload_it(qtbot, make_window, tiny_checkpoint, gui_home):
    from nemo_desktop.gui.panes.model_manager.custom_import import CheckpointImport

    window = make_window(model_process="in-process")  # it checks the loaded classifier object's preprocessing
    pane = _manager(qtbot, window)
    request = CheckpointImport("my-tiny", "test_resnet", tiny_checkpoint["weights"], tiny_checkpoint["classes"])
    with qtbot.waitSignal(window.sig_models_changed, timeout=60000):
        pane.run_import(request, load_after=True)
    qtbot.waitUntil(lambda: pane.model.row_of("my-tiny") >= 0 and _status(pane, "my-tiny") == "loaded",
                    timeout=20000)
    entry = json.loads((gui_home / "config" / "catalog.json").read_text())["entries"][0]
    assert entry["source"] == f"checkpoint:test_resnet:{tiny_checkpoint['weights']}"
    assert entry["options"]["class_file"] == str(tiny_checkpoint["classes"])
    # preprocessing from the checkpoint's config.json (save_for_hf at 32 px)
    assert entry["options"]["data_config"]["input_size"] == [3, 32, 32]
    assert window.session.get("classifier").data_config["input_size"] == (3, 32, 32)
    classifier = window.session.get("classifier")
    assert classifier.class_names[:2] == ["cat", "dog"] and classifier.info.model_id == "my-tiny"
    assert "my-tiny" in pane.loaded_label.text()

    pane.select("my-tiny")
    assert pane.unload_button.isEnabled() and not pane.load_button.isEnabled()
    with qtbot.waitSignal(window.sig_models_changed, timeout=20000):
        pane.unload_selected()
    assert window.session.get("classifier") is None and _status(pane, "my-tiny") == "local"


def test_a_checkpoint_with_the_wrong_class_list_fails_with_a_clear_error(qtbot, make_window, tiny_checkpoint):
    from nemo_desktop.gui.panes.model_manager.custom_import import CheckpointImport
    from nemo_desktop.gui.widgets.error_dialog import ErrorDialog

    window = make_window()
    pane = _manager(qtbot, window)
    request = CheckpointImport("wrong", "test_resnet", tiny_checkpoint["weights"], tiny_checkpoint["three_classes"])
    pane.run_import(request, load_after=True)
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(ErrorDialog)), timeout=60000)
    dialog = next(d for d in window.findChildren(ErrorDialog) if d.isVisible())
    assert "head has 10 outputs, but 3 class names" in dialog.message_label.text()
    assert "one name per output" in dialog.hint_label.text()
    assert window.session.get("classifier") is None


# -- settings: device, token and endpoint keys (never stored in clear) --------------------------------------

def _settings_file(home):
    return json.loads((home / "config" / "settings.json").read_text())


def test_device_and_dtype_are_saved(qtbot, make_window, gui_home):
    pane = _manager(qtbot, make_window())
    panel = pane.settings_panel
    qtbot.waitUntil(lambda: panel.settings is not None, timeout=10000)
    panel.dtype_combo.setCurrentText("float16")
    handle = panel._save_compute()
    with qtbot.waitSignal(handle.sig_done, timeout=10000):
        pass
    assert _settings_file(gui_home)["compute"]["dtype"] == "float16"
    assert pane.host.session.load_options().dtype == "float16"


def test_the_model_process_setting_is_saved_and_used_at_the_next_start(qtbot, make_window, gui_home):
    pane = _manager(qtbot, make_window())
    assert pane.host.model_host.mode == "worker"  # the default
    panel = pane.settings_panel
    qtbot.waitUntil(lambda: panel.settings is not None, timeout=10000)
    assert panel.worker_check.isChecked() and panel.grace_spin.value() == 10
    panel.grace_spin.setValue(20)
    panel._populating = True  # one save for both changes
    panel.worker_check.setChecked(False)  # in-process: for debugging
    panel._populating = False
    handle = panel._save_compute()
    with qtbot.waitSignal(handle.sig_done, timeout=10000):
        pass
    saved = _settings_file(gui_home)["compute"]
    assert saved["model_process"] == "in-process" and saved["cancel_grace_s"] == 20
    window = make_window()
    assert window.model_host.mode == "in-process" and window.session.remote is None
    panel._populating = True
    panel.worker_check.setChecked(True)
    panel._populating = False
    handle = panel._save_compute()
    with qtbot.waitSignal(handle.sig_done, timeout=10000):
        pass
    window = make_window()
    assert window.model_host.mode == "worker" and window.model_host.grace_s == 20
    assert window.session.remote is window.model_host


def test_a_pasted_token_without_a_keyring_is_refused_and_never_kept(qtbot, make_window, gui_home, monkeypatch):
    import sys

    from nemo_desktop.gui.widgets.error_dialog import ErrorDialog

    monkeypatch.setitem(sys.modules, "keyring", None)  # import keyring -> ImportError
    window = make_window()
    panel = _manager(qtbot, window).settings_panel
    qtbot.waitUntil(lambda: panel.settings is not None, timeout=10000)
    secret = "hf_" + "A1b2C3d4" * 4
    panel.token_paste.setText(secret)
    handle = panel.store_pasted_token()
    assert panel.token_paste.text() == ""  # cleared at once
    with qtbot.waitSignal(handle.sig_failed, timeout=10000):
        pass
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(ErrorDialog)), timeout=5000)
    dialog = next(d for d in window.findChildren(ErrorDialog) if d.isVisible())
    assert "no OS keyring" in dialog.message_label.text() and "env:" in dialog.hint_label.text()
    assert secret not in dialog.report_text()
    assert not (gui_home / "config" / "settings.json").exists() or secret not in \
        (gui_home / "config" / "settings.json").read_text()

    # A key typed into the reference field is refused too, and not left on screen.
    panel.token_ref_edit.setText(secret)
    panel.apply_token_reference()
    assert panel.token_ref_edit.text() == ""


def test_pasted_keys_go_to_the_keyring_and_settings_keep_references(qtbot, make_window, gui_home, monkeypatch):
    import fake_keyring

    keyring = fake_keyring.install(monkeypatch)
    window = make_window(model_process="in-process")  # the endpoint's model reads the fake keyring of this process
    panel = _manager(qtbot, window).settings_panel
    qtbot.waitUntil(lambda: panel.settings is not None, timeout=10000)
    token = "hf_" + "Z9y8X7w6" * 4
    panel.token_paste.setText(token)
    with qtbot.waitSignal(panel.store_pasted_token().sig_done, timeout=10000):
        pass
    assert keyring == {("nemo-desktop", "huggingface-token"): token}
    assert _settings_file(gui_home)["hub"]["token_env"] == "keyring:nemo-desktop/huggingface-token"
    assert panel.token_ref_edit.text() == "keyring:nemo-desktop/huggingface-token"
    assert "keyring" in panel.token_status.text() and token not in panel.token_status.text()

    # An endpoint with a pasted API key: the key goes to the keyring, the settings name the keyring entry.
    dialog = panel.edit_endpoint(None)
    dialog.name_edit.setText("local-vllm")
    dialog.url_edit.setText("http://127.0.0.1:8000/v1")
    dialog.model_edit.setText("Qwen/Qwen2.5-VL-7B-Instruct")
    api_key = "sk-" + "Q1w2E3r4T5y6" * 2
    dialog.key_edit.setText(api_key)
    dialog.use_paste.setChecked(True)
    with qtbot.waitSignal(panel.save_endpoint(dialog).sig_done, timeout=10000):
        pass
    assert dialog.key_edit.text() == ""
    saved = _settings_file(gui_home)["endpoints"]
    assert saved == [{"name": "local-vllm", "base_url": "http://127.0.0.1:8000/v1",
                      "model": "Qwen/Qwen2.5-VL-7B-Instruct", "api_key_env": "keyring:nemo-desktop/endpoint-local-vllm"}]
    assert keyring[("nemo-desktop", "endpoint-local-vllm")] == api_key
    text = (gui_home / "config" / "settings.json").read_text()
    assert api_key not in text and token not in text
    assert panel.endpoints_table.rowCount() == 1
    assert "keyring" in panel.endpoints_table.item(0, 3).text()
    dialog.close()

    # "Use as captioning model" builds the OpenAI-compatible MLLM from the endpoint (no request is made).
    panel.endpoints_table.selectRow(0)
    with qtbot.waitSignal(window.sig_models_changed, timeout=20000):
        panel.use_endpoint_button.click()
    assert window.session.loaded()["mllm"] == "endpoint:local-vllm"


def test_load_is_disabled_with_the_reason_for_weights_not_on_disk(qtbot, make_window, tmp_path, monkeypatch,
                                                                   tiny_checkpoint):
    from nemo_desktop.gui.panes.model_manager.custom_import import CheckpointImport

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: nothing downloaded
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    window = make_window()
    window.show()
    pane = _manager(qtbot, window)
    pane.select("resnet50")
    assert _status(pane, "resnet50") == "not downloaded"
    assert not pane.load_button.isEnabled()
    assert "Download resnet50 first" in pane.load_button.toolTip()
    assert pane.load_reason.isVisible() and "weights on disk" in pane.load_reason.text()
    started = []
    window.jobs.sig_job_added.connect(lambda h: started.append(h.title))
    assert pane.load_selected() is None and not any(t.startswith("Loading") for t in started)  # double-click too

    request = CheckpointImport("on-disk", "test_resnet", tiny_checkpoint["weights"], tiny_checkpoint["classes"])
    pane.run_import(request, load_after=False)
    qtbot.waitUntil(lambda: pane.model.row_of("on-disk") >= 0 and pane.select("on-disk"), timeout=20000)
    assert _status(pane, "on-disk") == "local"
    assert pane.load_button.isEnabled() and not pane.load_reason.isVisible()
