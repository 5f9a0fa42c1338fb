"""Downloads, status, disk usage and delete: offline against a cache layout built here, and online only
against a local Hub on 127.0.0.1 (fixtures_tiny/hub_server.py). No test reaches the real network."""
from __future__ import annotations

import logging
import os
import socket
from types import SimpleNamespace

import pytest

from fixtures_tiny.hub_server import FakeHub, FakeRepo, make_cached_repo
from nemo_desktop.core.base.errors import GatedModelError, JobCancelled, ModelError, WeightsNotFoundError
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.models import downloads as dl

SHA = "a" * 40  # make_cached_repo's default commit


def blob_bytes(files: dict[str, bytes]) -> int:
    """Bytes on disk: identical files share one blob, as in the real cache."""
    return sum(len(v) for v in set(files.values()))


DIFFUSERS_FILES = {
    "model_index.json": b'{"_class_name": "FluxKontextPipeline", "vae": ["diffusers", "AutoencoderKL"], '
                        b'"transformer": ["diffusers", "FluxTransformer2DModel"], "image_encoder": [null, null]}',
    "vae/config.json": b"{}",
    "vae/diffusion_pytorch_model.safetensors": b"v" * 1000,
    "transformer/config.json": b"{}",
    "transformer/diffusion_pytorch_model.safetensors.index.json":
        b'{"weight_map": {"a": "diffusion_pytorch_model-00001-of-00002.safetensors", '
        b'"b": "diffusion_pytorch_model-00002-of-00002.safetensors"}}',
    "transformer/diffusion_pytorch_model-00001-of-00002.safetensors": b"t" * 3000,
    "transformer/diffusion_pytorch_model-00002-of-00002.safetensors": b"u" * 2000,
}


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test on any connection attempt at all (loopback included)."""
    attempts = []

    def refuse(self, address):
        attempts.append(address)
        raise AssertionError(f"network attempt in an offline test: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


# -- choosing files ---------------------------------------------------------------------------------------

def test_select_files_prefers_safetensors_and_skips_duplicates():
    listing = ["model_index.json", "flux1-kontext-dev.safetensors", "ae.safetensors", "README.md", "teaser.png",
               "unet/config.json", "unet/diffusion_pytorch_model.safetensors", "unet/diffusion_pytorch_model.bin",
               "unet/diffusion_pytorch_model.fp16.safetensors", "vae/diffusion_pytorch_model.bin",
               "text_encoder/model.safetensors", "text_encoder/tf_model.h5", "text_encoder/flax_model.msgpack",
               "onnx/model.onnx", "tokenizer/vocab.json", ".gitattributes", "LICENSE.md"]
    assert dl.select_files(listing) == [
        "model_index.json", "text_encoder/model.safetensors", "tokenizer/vocab.json",
        "unet/config.json", "unet/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.bin"]


def test_select_files_keeps_root_weights_of_a_transformers_repo_and_only_variants_when_alone():
    assert dl.select_files(["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                            "pytorch_model.bin"]) == [
        "config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert dl.select_files(["unet/x.fp16.safetensors", "unet/x.fp16.bin"]) == ["unet/x.fp16.safetensors"]


def test_catalog_allow_patterns_are_applied_before_the_duplicate_rules():
    listing = ["model_index.json", "instruct-pix2pix-00-22000.safetensors", "unet/diffusion_pytorch_model.safetensors",
               "unet/diffusion_pytorch_model.bin", "unet/config.json", "README.md"]
    assert dl._filter(listing, ["*.json", "*.safetensors"]) == [
        "model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors"]


# -- offline: status, usage, delete ------------------------------------------------------------------------

def test_status_of_complete_partial_and_absent_repos(tmp_path, no_network):
    make_cached_repo(tmp_path, "org/complete", DIFFUSERS_FILES)
    shard_missing = {k: v for k, v in DIFFUSERS_FILES.items() if "00002-of" not in k}
    make_cached_repo(tmp_path, "org/partial", shard_missing)
    folder = tmp_path / "models--org--interrupted" / "blobs"
    folder.mkdir(parents=True)
    (folder / "0123.abcd1234.incomplete").write_bytes(b"x" * 500)

    done = dl.repo_status("org/complete", cache_dir=str(tmp_path))
    assert done.downloaded and done.commit == SHA and done.size_on_disk == blob_bytes(DIFFUSERS_FILES)
    assert done.snapshot_path == str(tmp_path / "models--org--complete" / "snapshots" / SHA)
    part = dl.repo_status("org/partial", cache_dir=str(tmp_path))
    assert part.state == "partial"
    assert part.missing == ["transformer/diffusion_pytorch_model-00002-of-00002.safetensors"]
    assert dl.repo_status("org/interrupted", cache_dir=str(tmp_path)).state == "partial"
    assert dl.repo_status("org/nothing", cache_dir=str(tmp_path)).state == "absent"
    assert no_network == []


def test_missing_diffusers_component_folder_is_partial(tmp_path):
    files = {k: v for k, v in DIFFUSERS_FILES.items() if not k.startswith("vae/")}
    make_cached_repo(tmp_path, "org/novae", files)
    st = dl.repo_status("org/novae", cache_dir=str(tmp_path))
    assert st.state == "partial" and st.missing == ["vae/"]


def test_status_follows_the_revision(tmp_path):
    make_cached_repo(tmp_path, "org/pinned", {"config.json": b"{}", "model.safetensors": b"w"}, sha="b" * 40, ref=None)
    assert dl.repo_status("org/pinned", revision="b" * 40, cache_dir=str(tmp_path)).downloaded
    assert dl.repo_status("org/pinned", revision="c" * 40, cache_dir=str(tmp_path)).state == "partial"
    assert dl.repo_status("org/pinned", cache_dir=str(tmp_path)).downloaded  # single snapshot, no ref


def test_disk_usage_lists_every_repo_largest_first(tmp_path, no_network):
    make_cached_repo(tmp_path, "org/big", DIFFUSERS_FILES)
    make_cached_repo(tmp_path, "org/small", {"config.json": b"{}", "model.safetensors": b"w" * 10})
    rows = dl.disk_usage(str(tmp_path))
    assert [r.repo_id for r in rows] == ["org/big", "org/small"]
    assert rows[0].size_on_disk == blob_bytes(DIFFUSERS_FILES) and rows[0].revisions == (SHA,)
    assert rows[1].size_on_disk == 12 and rows[1].nb_files == 2
    assert dl.disk_usage(str(tmp_path / "no-such-cache")) == []


def test_delete_removes_one_repo_and_reports_bytes_freed(tmp_path, no_network):
    # Both repos share a commit hash on purpose: deleting by hash (scan_cache_dir().delete_revisions)
    # would remove both.
    make_cached_repo(tmp_path, "org/big", DIFFUSERS_FILES)
    make_cached_repo(tmp_path, "org/small", {"config.json": b"{}", "model.safetensors": b"w" * 10})
    freed = dl.delete_repo("org/big", cache_dir=str(tmp_path))
    assert freed >= blob_bytes(DIFFUSERS_FILES)
    assert not (tmp_path / "models--org--big").exists()
    assert dl.repo_status("org/small", cache_dir=str(tmp_path)).downloaded
    assert dl.delete_repo("org/big", cache_dir=str(tmp_path)) == 0


def test_delete_removes_a_repo_with_only_partial_files(tmp_path):
    blobs = tmp_path / "models--org--half" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "x.1234.incomplete").write_bytes(b"z" * 100)
    assert dl.delete_repo("org/half", cache_dir=str(tmp_path)) == 100
    assert not (tmp_path / "models--org--half").exists()


def test_offline_download_of_an_uncached_repo_fails_without_network(tmp_path, no_network, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightsNotFoundError) as err:
        dl.download_repo("org/absent", cache_dir=str(tmp_path), model_id="my-model")
    assert "HF_HUB_OFFLINE" in err.value.hint and "nemo models download my-model" in err.value.hint
    assert no_network == []


def test_offline_download_of_a_cached_repo_returns_the_snapshot(tmp_path, no_network, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    make_cached_repo(tmp_path, "org/complete", DIFFUSERS_FILES)
    assert dl.download_repo("org/complete", cache_dir=str(tmp_path)).endswith(SHA)
    assert no_network == []


def test_entry_status_of_hub_and_local_entries(tmp_path, no_network):
    def entry(repo, allow_patterns=None):
        return SimpleNamespace(repo=repo, revision="main", allow_patterns=allow_patterns)

    make_cached_repo(tmp_path, "org/complete", {"config.json": b"{}", "model.safetensors": b"w" * 10})
    make_cached_repo(tmp_path, "org/partial", {"model_index.json": DIFFUSERS_FILES["model_index.json"]})
    st = dl.entry_status(entry("org/complete"), str(tmp_path))
    assert st == dl.EntryStatus("downloaded", 12, SHA, str(tmp_path / "models--org--complete" / "snapshots" / SHA))
    assert dl.entry_status(entry("org/partial"), str(tmp_path)).status == "partial"
    assert dl.entry_status(entry("org/absent"), str(tmp_path)).to_dict() == {
        "status": "not downloaded", "size_on_disk": 0, "commit": None, "path": None}
    assert dl.entry_status(entry(str(tmp_path)), str(tmp_path)) == dl.EntryStatus("local", path=str(tmp_path))
    gone = tmp_path / "gone"
    assert dl.entry_status(entry(str(gone)), str(tmp_path)) == dl.EntryStatus("missing", path=str(gone))


def test_cache_dir_follows_hf_home_and_portable_mode(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert dl.resolve_cache_dir() == str(tmp_path / "hfhome" / "hub")
    assert dl.resolve_cache_dir(str(tmp_path / "explicit")) == str(tmp_path / "explicit")
    monkeypatch.delenv("NEMO_HOME")
    monkeypatch.setenv("NEMO_PORTABLE", "1")
    assert dl.resolve_cache_dir().endswith(os.path.join("models_cache", "huggingface"))


# -- online, against the local Hub --------------------------------------------------------------------------

BIG = os.urandom(400_000)
HUB_FILES = {
    "model_index.json": DIFFUSERS_FILES["model_index.json"],
    "kontext-single-file.safetensors": b"s" * 5000,  # a root duplicate: must not be downloaded
    "transformer/config.json": b'{"a": 1}',
    "transformer/diffusion_pytorch_model.bin": b"p" * 700,  # pickle next to safetensors: skipped
    "transformer/diffusion_pytorch_model.safetensors": BIG,
    "vae/config.json": b"{}",
    "vae/diffusion_pytorch_model.safetensors": b"v" * 3000,
}
WANTED = ["model_index.json", "transformer/config.json", "transformer/diffusion_pytorch_model.safetensors",
          "vae/config.json", "vae/diffusion_pytorch_model.safetensors"]


@pytest.fixture
def hub(monkeypatch):
    """The local Hub, with huggingface_hub switched online for this test only."""
    from huggingface_hub import constants

    server = FakeHub().start()
    server.repos["org/tiny"] = FakeRepo(dict(HUB_FILES))
    server.repos["org/gated"] = FakeRepo({"config.json": b"{}", "model.safetensors": b"g" * 100}, gated=True,
                                         allowed_tokens={"hf_allowedTOKENforTESTS"})
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    yield server
    server.stop()


def _file_gets(hub):
    return sorted(p.split("/resolve/", 1)[1].split("/", 1)[1] for m, p, _ in hub.requests
                  if m == "GET" and "/resolve/" in p)


def test_download_reports_bytes_and_rate_and_fetches_only_needed_files(hub, tmp_path):
    seen = []
    path = dl.download_repo("org/tiny", ctx=JobContext(on_progress=seen.append), cache_dir=str(tmp_path))
    sha = hub.repos["org/tiny"].sha
    assert path == str(tmp_path / "models--org--tiny" / "snapshots" / sha)
    assert _file_gets(hub) == WANTED
    total = sum(len(HUB_FILES[f]) for f in WANTED)
    byte_reports = [p for p in seen if p.total is not None]
    assert all(p.stage == "Downloading org/tiny" and p.total == total for p in byte_reports)
    assert [p.done for p in byte_reports] == sorted(p.done for p in byte_reports)
    assert byte_reports[-1].done == total and byte_reports[-1].rate > 0
    with open(os.path.join(path, "transformer/diffusion_pytorch_model.safetensors"), "rb") as fh:
        assert fh.read() == BIG
    assert (tmp_path / "models--org--tiny" / "refs" / "main").read_text() == sha
    st = dl.repo_status("org/tiny", cache_dir=str(tmp_path))
    assert st.downloaded and st.commit == sha

    hub.requests.clear()
    assert dl.download_repo("org/tiny", cache_dir=str(tmp_path)) == path
    assert _file_gets(hub) == []  # everything cached: nothing fetched again


def test_cancel_inside_a_file_then_resume_fetches_only_what_is_missing(hub, tmp_path):
    hub.throttle = (16_384, 0.005)
    token = CancelToken()

    def on_progress(p):
        if p.total and p.done > 100_000:
            token.cancel()

    ctx = JobContext(on_progress=on_progress, cancel=token)
    with pytest.raises(JobCancelled):
        dl.download_repo("org/tiny", ctx=ctx, cache_dir=str(tmp_path), max_workers=1)
    snapshot = tmp_path / "models--org--tiny" / "snapshots" / hub.repos["org/tiny"].sha
    assert (snapshot / "transformer/config.json").exists()  # finished before the cancel: kept
    assert not (snapshot / "transformer/diffusion_pytorch_model.safetensors").exists()
    assert not list((tmp_path / "models--org--tiny" / "blobs").glob("*.incomplete"))
    assert dl.repo_status("org/tiny", cache_dir=str(tmp_path)).state != "downloaded"
    big_gets = [p for m, p, _ in hub.requests if m == "GET" and p.endswith("model.safetensors")]
    assert len(big_gets) == 1  # stopped inside the big file, before the VAE file was started

    hub.throttle = None
    hub.requests.clear()
    dl.download_repo("org/tiny", cache_dir=str(tmp_path))
    assert _file_gets(hub) == ["transformer/diffusion_pytorch_model.safetensors", "vae/config.json",
                               "vae/diffusion_pytorch_model.safetensors"]
    assert dl.repo_status("org/tiny", cache_dir=str(tmp_path)).downloaded


def test_dropped_connection_is_resumed_with_a_range_request(hub, tmp_path):
    # huggingface_hub writes in 10 MB chunks, so the cut must come after the first chunk to leave bytes to keep.
    data = os.urandom(11 * 1024 * 1024)
    hub.repos["org/large"] = FakeRepo({"config.json": b"{}", "model.safetensors": data})
    hub.fail_after["org/large/model.safetensors"] = 10 * 1024 * 1024 + 12345
    path = dl.download_repo("org/large", cache_dir=str(tmp_path), max_workers=1)
    with open(os.path.join(path, "model.safetensors"), "rb") as fh:
        assert fh.read() == data
    ranges = [h.get("Range") or h.get("range") for m, p, h in hub.requests
              if m == "GET" and p.endswith("/model.safetensors")]
    assert ranges == [None, "bytes=10485760-"]


def test_gated_repo_without_token_names_the_license_page(hub, tmp_path):
    with pytest.raises(GatedModelError) as err:
        dl.download_repo("org/gated", cache_dir=str(tmp_path), gated=True)
    text = err.value.user_text()
    assert "https://huggingface.co/org/gated" in text and "HF_TOKEN" in text and "hf auth login" in text
    assert hub.requests == []  # the catalog says gated: no request at all

    with pytest.raises(GatedModelError):  # unknown to the catalog: the Hub's model info says gated
        dl.download_repo("org/gated", cache_dir=str(tmp_path))
    assert _file_gets(hub) == []


def test_gated_repo_with_a_token_that_has_no_access(hub, tmp_path, monkeypatch):
    token = "hf_otherTOKENwithoutACCESS"
    monkeypatch.setenv("HF_TOKEN", token)
    with pytest.raises(GatedModelError) as err:
        dl.download_repo("org/gated", cache_dir=str(tmp_path), gated=True)
    assert "accept the license" in err.value.hint and "https://huggingface.co/org/gated" in err.value.hint
    assert token not in str(err.value.to_dict())
    monkeypatch.setenv("HF_TOKEN", "hf_allowedTOKENforTESTS")
    assert dl.download_repo("org/gated", cache_dir=str(tmp_path), gated=True).endswith(hub.repos["org/gated"].sha)


def test_gated_repo_downloads_with_an_explicit_token_and_leaves_the_environment_alone(hub, tmp_path, caplog):
    """The GUI passes the token its settings point to; it must reach the Hub without going through os.environ."""
    token = "hf_allowedTOKENforTESTS"
    env_before = dict(os.environ)
    caplog.set_level(logging.DEBUG)
    path = dl.download_repo("org/gated", cache_dir=str(tmp_path), gated=True, token=token)
    assert path.endswith(hub.repos["org/gated"].sha)
    assert dl.repo_status("org/gated", cache_dir=str(tmp_path)).downloaded
    assert dict(os.environ) == env_before
    sent = [{k.lower(): v for k, v in h.items()}.get("authorization") for _m, _p, h in hub.requests]
    assert sent and set(sent) == {f"Bearer {token}"}  # model info and every file
    assert token not in caplog.text

    other = "hf_otherTOKENwithoutACCESS"  # an explicit token without access is reported as such
    with pytest.raises(GatedModelError) as err:
        dl.download_repo("org/gated", cache_dir=str(tmp_path / "other"), gated=True, token=other)
    assert "has no access" in err.value.message and "accept the license" in err.value.hint
    assert other not in str(err.value.to_dict()) and other not in caplog.text
    assert dict(os.environ) == env_before


def test_status_uses_the_listing_cached_by_snapshot_download(hub, tmp_path):
    """Caches filled by other tools (diffusers calls snapshot_download) are judged by the exact listing."""
    from huggingface_hub import snapshot_download

    snapshot_download("org/tiny", cache_dir=str(tmp_path), endpoint=hub.url,
                      allow_patterns=["model_index.json", "vae/*", "transformer/config.json"])
    st = dl.repo_status("org/tiny", cache_dir=str(tmp_path))
    assert st.state == "partial" and st.missing == ["transformer/diffusion_pytorch_model.safetensors"]
    snapshot_download("org/tiny", cache_dir=str(tmp_path), endpoint=hub.url,
                      allow_patterns=["transformer/diffusion_pytorch_model.safetensors"])
    assert dl.repo_status("org/tiny", cache_dir=str(tmp_path)).downloaded


def test_unknown_repo_is_a_clear_error(hub, tmp_path):
    with pytest.raises(ModelError, match="not found"):
        dl.download_repo("org/does-not-exist", cache_dir=str(tmp_path))
