"""Without a network (the Hub's name does not resolve), a missing model fails at once from the cache instead of
after huggingface_hub's retries (~30 s measured for one classifier)."""
from __future__ import annotations

import socket
import time

import pytest

from nemo_desktop.core.base.errors import WeightsNotFoundError
from nemo_desktop.core.models import hub_files
from nemo_desktop.core.models.families import LoadOptions


@pytest.fixture
def no_dns(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)

    def unresolvable(host, *a, **k):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unresolvable)


def test_missing_weights_fail_fast_without_a_network(no_dns, monkeypatch):
    import huggingface_hub

    calls = []
    real = huggingface_hub.hf_hub_download

    def spy(*a, **k):
        calls.append(k.get("local_files_only"))
        return real(*a, **k)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", spy)
    assert hub_files.hub_unresolvable()
    t = time.perf_counter()
    with pytest.raises(WeightsNotFoundError) as err:
        hub_files.fetch_file("timm/some-model", "config.json", LoadOptions(), model_id="some-model")
    assert time.perf_counter() - t < 1.0
    assert calls == [True]  # the cache only: no request, no retry
    assert "nemo models download some-model" in err.value.hint


def test_a_resolvable_hub_is_asked(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [("ok",)])
    assert not hub_files.hub_unresolvable()
