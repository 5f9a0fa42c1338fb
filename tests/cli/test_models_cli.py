"""`nemo models list|download|rm|du` through the real entry point (offline, or against a local Hub)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fixtures_tiny.hub_server import FakeHub, FakeRepo, make_cached_repo
from nemo_desktop.cli.main import main
from nemo_desktop.core.models.catalog import list_catalog

PIX2PIX_FILES = {
    "model_index.json": b'{"_class_name": "StableDiffusionInstructPix2PixPipeline", "unet": ["diffusers", "U"]}',
    "unet/config.json": b"{}",
    "unet/diffusion_pytorch_model.safetensors": b"w" * 2048,
}


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_list_json_has_every_catalog_entry_with_status(hub_cache, capsys):
    make_cached_repo(hub_cache, "timbrooks/instruct-pix2pix", PIX2PIX_FILES, sha="c" * 40)
    assert main(["models", "list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cache_dir"] == str(hub_cache)
    rows = {m["id"]: m for m in data["models"]}
    assert set(rows) == {e.id for e in list_catalog()}
    for m in rows.values():
        assert m["status"] in ("downloaded", "partial", "not downloaded", "local", "missing")
        assert {"kind", "family", "repo", "license", "gated", "disk_size_bytes", "vram_bf16_gb",
                "recommended_gpu", "license_url"} <= set(m)
    assert rows["instruct-pix2pix"]["status"] == "downloaded" and rows["instruct-pix2pix"]["commit"] == "c" * 40
    assert rows["flux-kontext-dev"]["status"] == "not downloaded" and rows["flux-kontext-dev"]["gated"] is True


def test_list_table_filtered_by_kind(hub_cache, capsys):
    assert main(["models", "list", "--kind", "editor"]) == 0
    out = capsys.readouterr().out
    editors = {e.id for e in list_catalog("editor")}
    assert all(i in out for i in editors) and "vit-b16-augreg2" not in out
    assert out.splitlines()[0].split()[:3] == ["ID", "KIND", "STATUS"]


def test_du_and_rm(hub_cache, capsys, monkeypatch):
    make_cached_repo(hub_cache, "timbrooks/instruct-pix2pix", PIX2PIX_FILES, sha="c" * 40)
    make_cached_repo(hub_cache, "someone/other", {"config.json": b'{"x": 1}', "model.safetensors": b"m" * 10})
    assert main(["models", "du", "--json"]) == 0
    du = json.loads(capsys.readouterr().out)
    assert [r["repo_id"] for r in du["repos"]] == ["timbrooks/instruct-pix2pix", "someone/other"]
    assert du["repos"][0]["catalog_ids"] == ["instruct-pix2pix"] and du["total_bytes"] > 2048

    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert main(["models", "rm", "instruct-pix2pix"]) == 2  # no --yes and nobody to ask
    assert (hub_cache / "models--timbrooks--instruct-pix2pix").exists()
    assert main(["models", "rm", "instruct-pix2pix", "--json"]) == 2  # the refusal is JSON on stdout under --json
    assert json.loads(capsys.readouterr().out)["error"]["hint"] == "Add --yes to delete without asking."
    assert main(["models", "rm", "instruct-pix2pix", "--yes"]) == 0
    assert "deleted timbrooks/instruct-pix2pix" in capsys.readouterr().out
    assert main(["models", "rm", "instruct-pix2pix", "--yes", "--json"]) == 0  # already gone
    assert json.loads(capsys.readouterr().out) == {"repo": "timbrooks/instruct-pix2pix", "deleted": False,
                                                   "freed_bytes": 0}
    assert not (hub_cache / "models--timbrooks--instruct-pix2pix").exists()
    assert (hub_cache / "models--someone--other").exists()


def test_download_offline_says_how_to_get_the_weights(hub_cache, capsys):
    assert main(["models", "download", "qwen-image-edit"]) == 3  # runtime: the hub cannot be reached
    err = capsys.readouterr().err
    assert "Qwen/Qwen-Image-Edit" in err and "HF_HUB_OFFLINE" in err


def test_unknown_id_suggests_close_matches(capsys):
    assert main(["models", "rm", "flux-kontext"]) == 2
    assert "flux-kontext-dev" in capsys.readouterr().err


def _cli_env(hub, cache):
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0",
           "HF_HUB_CACHE": str(cache), "PYTHONUNBUFFERED": "1"}
    env.pop("HF_TOKEN", None)
    return env


def test_download_shows_progress_and_ctrl_c_stops_cleanly_then_resumes(tmp_path):
    """A real process against the local Hub: SIGINT mid-file, exit 130, finished files kept, re-run completes."""
    hub = FakeHub().start()
    try:
        hub.repos["org/slow"] = FakeRepo({"config.json": b"{}", "model.safetensors": os.urandom(3_000_000)})
        hub.throttle = (32_768, 0.02)  # ~1.6 MB/s: the big file takes about 2 s
        cache = tmp_path / "cache"
        cmd = [sys.executable, "-m", "nemo_desktop.cli.main", "models", "download", "org/slow"]
        proc = subprocess.Popen(cmd, env=_cli_env(hub, cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 120
        while not any(m == "GET" and p.endswith("model.safetensors") for m, p, _ in hub.requests):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "run the same command to resume" in err
        snapshot = cache / "models--org--slow" / "snapshots" / hub.repos["org/slow"].sha
        assert (snapshot / "config.json").exists() and not (snapshot / "model.safetensors").exists()

        hub.throttle = None
        hub.requests.clear()
        done = subprocess.run(cmd, env=_cli_env(hub, cache), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "org/slow" in done.stderr  # the tqdm bar
        assert f"downloaded to {snapshot}" in done.stdout
        gets = [p for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p]
        assert len(gets) == 1 and gets[0].endswith("model.safetensors")  # config.json was kept
    finally:
        hub.stop()
