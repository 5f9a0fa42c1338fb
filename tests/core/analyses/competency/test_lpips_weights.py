"""LPIPS' managed trunk: status for `nemo doctor`, and the download through torch's own downloader (a loopback
server stands in for download.pytorch.org): a checksum mismatch is refused and leaves nothing behind."""
from __future__ import annotations

import hashlib
import http.server
import json
import threading

import pytest
import torch

from nemo_desktop.core.analyses.competency import lpips_distance as ld


@pytest.fixture
def hub(tmp_path, monkeypatch):
    # TORCH_HOME, not torch.hub.set_dir: set_dir pins a global that outlives the test and overrides every later
    # test's TORCH_HOME.
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    assert torch.hub.get_dir() == str(tmp_path / "hub")
    return tmp_path / "hub"


@pytest.fixture
def server(tmp_path):
    payload = b"not really alexnet, but bytes with a known sha256" * 100
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "w.pth").write_bytes(payload)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(tmp_path / "www"), **kw)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/w.pth", hashlib.sha256(payload).hexdigest()
    httpd.shutdown()


def test_status_says_missing_and_loading_says_unavailable(hub):
    status = ld.trunk_status("alex")
    assert status["present"] is False and status["path"].startswith(str(hub))
    with pytest.raises(ld.MetricUnavailable, match="unavailable") as exc:
        ld.load_lpips("alex")
    assert "nemo competency lpips --download" in exc.value.hint


def test_download_checks_the_hash_in_the_file_name(hub, server, monkeypatch):
    url, sha = server
    monkeypatch.setitem(ld.TRUNK_FILES, "alex", f"alexnet-owt-{'0' * 8}.pth")  # a prefix the bytes do not have
    with pytest.raises(ld.MetricUnavailable, match="checksum"):
        ld.download_trunk("alex", url=url, progress=False)
    assert not ld.trunk_path("alex").exists() and not list(hub.rglob("*.pth"))
    monkeypatch.setitem(ld.TRUNK_FILES, "alex", f"alexnet-owt-{sha[:8]}.pth")
    path = ld.download_trunk("alex", url=url, progress=False)
    assert path.is_file() and ld.trunk_status("alex")["present"] is True


def test_doctor_reports_the_metric_weights(hub, capsys):
    from nemo_desktop.cli.main import main

    assert main(["doctor", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["metric_weights"]["lpips-alex"]["present"] is False
    assert facts["metric_weights"]["fid-inception"]["present"] is False
    assert facts["metric_weights"]["fid-inception"]["path"].startswith(str(hub))
    assert main(["competency", "lpips"]) == 0
    assert "missing" in capsys.readouterr().out
